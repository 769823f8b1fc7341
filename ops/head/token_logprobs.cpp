#include "ops/head/token_logprobs.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/matrix_support.h"
#include "ops/head/top_k.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

Kernel token_logprobs(const OpTarget& target, uint32_t vocab, uint32_t k, uint32_t top, uint32_t capacity, uint32_t row_top) {
  if (vocab == 0 || capacity == 0) throw std::invalid_argument("token_logprobs: no logits or no rows");
  if (top > k || k > kMaxTopK)
    throw std::invalid_argument("token_logprobs: " + std::to_string(top) + " alternatives of " + std::to_string(k) +
                                " candidates (at most " + std::to_string(kMaxTopK) + ")");
  if (row_top < top) throw std::invalid_argument("token_logprobs: rows laid out for fewer alternatives than written");
  // A workgroup a row: the row's logits are read twice (its max, then its sum), the second time
  // from the L2. A server asks this of a few rows a step, beside a full LM head.
  const uint32_t wg = subgroup_multiple_workgroup(target, 1024);
  const uint32_t words = token_logprob_words(row_top);
  KernelBuilder kb("token_logprobs_" + std::to_string(vocab) + "_top" + std::to_string(top) + "_of" + std::to_string(row_top), {wg, 1, 1});
  auto counter = kb.buffer<u32>("counter", Access::Read);
  auto logits = kb.buffer<f32>("logits", Access::Read);
  auto sources = kb.buffer<u32>("sources", Access::Read);
  auto select_word = kb.buffer<u32>("select", Access::Read);
  std::optional<Buffer<f32>> top_values;
  std::optional<Buffer<u32>> top_indices;
  if (top) {
    top_values = kb.buffer<f32>("top_values", Access::Read);
    top_indices = kb.buffer<u32>("top_indices", Access::Read);
  }
  auto out = kb.buffer<u32>("out", Access::Write);
  auto stride = kb.push<u32>("stride");
  auto row = let("row", kb.workgroup_id().y());
  auto first = let("first", row * stride);
  auto scratch = kb.shared<f32>("scratch", wg);

  // kUnroll loads an invocation has in flight: one workgroup streams the whole row, so the loop
  // is bound by its loads' latency, not by bandwidth. Elements past the row read its last one and
  // count for nothing.
  constexpr uint32_t kUnroll = 8;
  auto at = [&](Expr<u32> j, uint32_t u) { return let("at", j + u * wg); };
  auto load = [&](Expr<u32> i) { return Expr<f32>(logits[first + min(i, constant<u32>(vocab - 1))]); };
  auto best = kb.var<f32>("best", -INFINITY);
  for_range(kb.local_index(), constant<u32>(vocab), constant<u32>(wg * kUnroll), [&](Expr<u32> j) {
    for (uint32_t u = 0; u < kUnroll; ++u) best = max(Expr<f32>(best), load(at(j, u)));  // the last one again: no harm
  }, "j");
  auto m = workgroup_max(kb, scratch, Expr<f32>(best), "row_max");
  barrier();  // scratch is read again below
  auto part = kb.var<f32>("part", 0.0f);
  for_range(kb.local_index(), constant<u32>(vocab), constant<u32>(wg * kUnroll), [&](Expr<u32> j) {
    std::vector<Expr<f32>> values;
    for (uint32_t u = 0; u < kUnroll; ++u) values.push_back(let("v", load(at(j, u))));  // all loads first
    for (uint32_t u = 0; u < kUnroll; ++u) {
      auto i = at(j, u);
      part = Expr<f32>(part) + select(i < vocab, exp(let_precise("below_max", values[u] - m)), constant<f32>(0.0f));
    }
  }, "j");
  auto sum = workgroup_add(kb, scratch, Expr<f32>(part), "row_sum");
  auto log_sum = let("log_sum", log(sum));
  auto logprob = [&](Expr<f32> l) { return let_precise("logprob", (l - m) - log_sum); };

  auto where = let("where", Expr<u32>(select_word[row]));
  auto base = let("base", (Expr<u32>(counter[0u]) & 1u) * (capacity * words) + row * words);
  if_(where != kNoLogprobs, [&] {
    if_(kb.local_index() == 0u, [&] {
      auto token = let("token", Expr<u32>(sources[where]));
      out[base] = token;
      out[base + 1u] = bitcast<u32>(logprob(Expr<f32>(logits[first + min(token, constant<u32>(vocab - 1))])));
    });
    if (top)
      if_(kb.local_index() < top, [&] {
        auto at = let("at", row * k + kb.local_index());
        auto slot = let("slot", base + 2u + 2u * kb.local_index());
        out[slot] = Expr<u32>((*top_indices)[at]);
        out[slot + 1u] = bitcast<u32>(logprob(Expr<f32>((*top_values)[at])));
      });
  });
  return kb.build();
}

Plan plan_token_logprobs(const OpTarget& target, uint32_t vocab, uint32_t k, uint32_t top, uint32_t capacity, uint32_t row_top) {
  return {token_logprobs(target, vocab, k, top, capacity, row_top), [](uint32_t rows) { return rt::Grid{1, rows}; }};
}

}  // namespace bdsl::ops
