#include "ops/head/repeat_penalty.h"

#include <string>

#include "ops/common/step_state.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {
constexpr uint32_t kWorkgroup = 256;
}

Kernel repeat_penalty(const OpTarget& /*target*/, uint32_t vocab, uint32_t context) {
  KernelBuilder k("repeat_penalty_" + std::to_string(vocab) + "_ctx" + std::to_string(context), {kWorkgroup, 1, 1});
  auto logits = k.buffer<f32>("logits", Access::ReadWrite);
  auto step = k.buffer<u32>("step", Access::Read);
  auto history = k.buffer<u32>("history", Access::ReadWrite);
  auto penalty = k.param<f32>("penalty");
  auto inverse_penalty = k.param<f32>("inverse_penalty");
  auto last_n = k.param<u32>("last_n");
  auto recent = k.shared<u32>("recent", kMaxRepeatLastN);
  auto lid = k.local_index();
  auto token = let("token", Expr<u32>(step[kStepToken]));
  auto pos = let("pos", min(Expr<u32>(step[kStepPos]), constant<u32>(context - 1)));
  auto count = let("count", min(min(last_n, pos + 1u), constant<u32>(kMaxRepeatLastN)));
  // recent[j] = the token at position pos - j: the one being decoded, then the history's.
  for_range(lid, count, constant<u32>(kWorkgroup), [&](Expr<u32> j) {
    if_(j == 0u, [&] { recent[j] = token; }).else_([&] { recent[j] = history[pos - j]; });
  }, "j");
  barrier();
  if_(lid == 0u, [&] { history[pos] = token; });
  // Each distinct token once: at its most recent position.
  for_range(lid, count, constant<u32>(kWorkgroup), [&](Expr<u32> j) {
    auto t = let("t", Expr<u32>(recent[j]));
    auto first = k.var<boolean>("first", t < vocab);
    for_range(0u, j, [&](Expr<u32> before) {
      if_(Expr<u32>(recent[before]) == t, [&] {
        first = false;
        break_();
      });
    }, "before");
    if_(first, [&] {
      auto l = let("l", Expr<f32>(logits[t]));
      logits[t] = select(l > 0.0f, l * inverse_penalty, l * penalty);
    });
  }, "j");
  return k.build();
}

Plan plan_repeat_penalty(const OpTarget& target, uint32_t vocab, uint32_t context) {
  return {repeat_penalty(target, vocab, context), fixed_grid({1})};
}

}  // namespace bdsl::ops
