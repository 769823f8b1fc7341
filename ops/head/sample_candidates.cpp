#include "ops/head/sample_candidates.h"

#include <bit>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "ops/common/matrix_support.h"
#include "ops/common/philox.h"
#include "ops/common/step_state.h"
#include "ops/head/argmax.h"
#include "ops/head/top_k.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

std::array<uint32_t, kSampleParamsWords> SampleParams::pack() const {
  return {std::bit_cast<uint32_t>(inverse_temperature), top_k, std::bit_cast<uint32_t>(top_p),
          std::bit_cast<uint32_t>(min_p), uint32_t(seed), uint32_t(seed >> 32), counter, 0};
}

Kernel sample_candidates(const OpTarget& target, uint32_t k, bool rows, uint32_t advance_context) {
  if (k == 0 || k > kMaxTopK)
    throw std::invalid_argument("sample_candidates: k " + std::to_string(k) + " must be in 1.." + std::to_string(kMaxTopK));
  if (rows && advance_context) throw std::invalid_argument("sample_candidates: rows advance no step state");
  const uint32_t wg = subgroup_multiple_workgroup(target, kMaxTopK);
  const std::string suffix = advance_context ? "_advance" : rows ? "_rows" : "";
  KernelBuilder kb("sample_candidates_k" + std::to_string(k) + suffix, {wg, 1, 1});
  auto values = kb.buffer<f32>("top_values", Access::Read);
  auto indices = kb.buffer<u32>("top_indices", Access::Read);
  auto params = kb.buffer<u32>("params", Access::Read);
  auto token = kb.buffer<u32>("token", Access::Write);
  std::optional<Buffer<u32>> step, generated;
  if (advance_context) {
    step = kb.buffer<u32>("step", Access::ReadWrite);
    generated = kb.buffer<u32>("generated", Access::Write);
  }
  auto weights = kb.shared<f32>("weights", k);
  auto kept = kb.shared<u32>("kept", 1);

  Expr<u32> row = rows ? let("row", kb.workgroup_id().y()) : constant<u32>(0u);
  auto first = let("first", row * k);
  auto param = [&](uint32_t word) { return Expr<u32>(params[row * kSampleParamsWords + word]); };
  auto value = [&](Expr<u32> i) { return Expr<f32>(values[first + i]); };
  auto inverse_temperature = let("inverse_temperature", bitcast<f32>(param(0)));
  auto top_k = let("top_k", param(1));
  auto top_p = let("top_p", bitcast<f32>(param(2)));
  auto min_p = let("min_p", bitcast<f32>(param(3)));
  auto best = let("best", value(constant<u32>(0u)));

  for_range(kb.local_index(), k, wg, [&](Expr<u32> i) { weights[i] = exp(value(i) - best); }, "i");
  barrier();
  // The cut, by one invocation: the sums run in the order the CPU twin runs them.
  if_(kb.local_index() == 0u, [&] {
    auto n = kb.var<u32>("n", select(top_k > 0u, min(top_k, constant<u32>(k)), constant<u32>(k)));
    if_(top_p < 1.0f, [&] {
      auto total = kb.var<f32>("total", 0.0f);
      for_range(0u, Expr<u32>(n), [&](Expr<u32> i) { total = let_precise("sum", total + weights[i]); }, "i");
      auto goal = let_precise("goal", top_p * total);
      auto mass = kb.var<f32>("mass", 0.0f);
      auto m = kb.var<u32>("m", 0u);
      while_([&] { return Expr<u32>(m) < Expr<u32>(n) && Expr<f32>(mass) < goal; }, [&] {
        mass = let_precise("grown", mass + weights[Expr<u32>(m)]);
        m = Expr<u32>(m) + 1u;
      });
      n = max(Expr<u32>(m), constant<u32>(1u));
    });
    if_(min_p > 0.0f, [&] {
      auto floor_value = let_precise("floor_value", best + log(min_p));
      auto m = kb.var<u32>("m_min_p", 1u);
      while_([&] { return Expr<u32>(m) < Expr<u32>(n) && value(Expr<u32>(m)) >= floor_value; },
             [&] { m = Expr<u32>(m) + 1u; });
      n = Expr<u32>(m);
    });
    if_(inverse_temperature == 0.0f, [&] { n = 1u; });
    kept[0u] = n;
  });
  barrier();
  auto n = let("kept_n", Expr<u32>(kept[0u]));
  Expr<u32> counter = advance_context ? let("counter", Expr<u32>((*step)[kStepPos]) + 1u) : param(6);
  auto seed_low = let("seed_low", param(4));
  auto seed_high = let("seed_high", param(5));
  auto own_v = kb.var<f32>("own_score", -INFINITY);
  auto own_i = kb.var<u32>("own_index", kArgmaxNone);
  for_range(kb.local_index(), Expr<u32>(n), constant<u32>(wg), [&](Expr<u32> i) {
    auto id = let("id", Expr<u32>(indices[first + i]));
    auto u = let("u", open_unit_interval(philox_first_word(id, counter, seed_low, seed_high)));
    // -log(u) as the host twin computes it: near u = 1 (the winning draws) from t = 1 - u, exact,
    // by its series (a log there may be off by 2^-21 absolutely, a large part of a small -log u).
    auto t = let_precise("t", 1.0f - u);
    auto s1 = let_precise("s1", t * 0.25f);
    auto s2 = let_precise("s2", s1 + 0.333333343f);
    auto s3 = let_precise("s3", s2 * t);
    auto s4 = let_precise("s4", s3 + 0.5f);
    auto s5 = let_precise("s5", s4 * t);
    auto s6 = let_precise("s6", s5 * t);
    auto series = let_precise("series", t + s6);
    auto minus_log_u = let("minus_log_u", select(t < 0.00390625f, series, -log(u)));
    auto gumbel = let_precise("gumbel", -log(minus_log_u));
    auto scaled = let_precise("scaled", (value(i) - best) * inverse_temperature);
    auto score = let_precise("score", scaled + gumbel);
    if_(argmax_beats(score, i, own_v, own_i), [&] {
      own_v = score;
      own_i = i;
    });
  }, "i");
  auto [score, winner] = workgroup_argmax_combine(kb, wg, own_v, own_i);
  (void)score;
  if_(kb.local_index() == 0u, [&] {
    auto chosen = let("chosen", Expr<u32>(indices[first + winner]));
    token[row] = chosen;
    if (advance_context) {
      auto pos = let("pos", Expr<u32>((*step)[kStepPos]));
      (*step)[kStepToken] = chosen;
      (*step)[kStepPos] = pos + 1u;
      (*step)[kStepEpoch] = Expr<u32>((*step)[kStepEpoch]) + 1u;
      if_(pos < advance_context, [&] { (*generated)[pos] = chosen; });
    }
  });
  return kb.build();
}

Plan plan_sample_candidates(const OpTarget& target, uint32_t k, bool rows, uint32_t advance_context) {
  return {sample_candidates(target, k, rows, advance_context), [](uint32_t count) { return rt::Grid{1, count}; }};
}

}  // namespace bdsl::ops
