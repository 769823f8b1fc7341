#include "ops/head/window_sort.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

namespace bdsl::ops {
using namespace bdsl::dsl;

Expr<boolean> window_before(Expr<f32> av, Expr<u32> ai, Expr<f32> bv, Expr<u32> bi) {
  return av > bv || (av == bv && ai < bi);
}

void bitonic_sort(KernelBuilder& k, const Shared<f32>& sv, const Shared<u32>& si, uint32_t chunk, uint32_t wg) {
  const uint32_t log2_chunk = std::countr_zero(chunk);
  for_range(constant<u32>(1u), constant<u32>(log2_chunk + 1u), [&](Expr<u32> stage) {
    auto size = let("size", constant<u32>(1u) << stage);
    for_range(0u, stage, [&](Expr<u32> pass) {
      auto stride = let("stride", constant<u32>(1u) << (stage - 1u - pass));
      for_range(k.local_index(), chunk / 2, wg, [&](Expr<u32> t) {
        // Pair t: i has a 0 at bit `stride`, j = i + stride. Blocks of `size` alternate direction;
        // the last stage has one block, descending.
        auto i = let("i", ((t & ~(stride - 1u)) << 1u) | (t & (stride - 1u)));
        auto j = let("j", i + stride);
        auto av = let("av", Expr<f32>(sv[i]));
        auto ai = let("ai", Expr<u32>(si[i]));
        auto bv = let("bv", Expr<f32>(sv[j]));
        auto bi = let("bj", Expr<u32>(si[j]));
        auto descending = (i & size) == 0u;
        auto swap = select(descending, window_before(bv, bi, av, ai), window_before(av, ai, bv, bi));
        if_(swap, [&] {
          sv[i] = bv;
          si[i] = bi;
          sv[j] = av;
          si[j] = ai;
        });
      }, "t");
      barrier();
    }, "pass");
  }, "stage");
}

void fill_window(KernelBuilder& k, const Shared<f32>& sv, const Shared<u32>& si, uint32_t first, uint32_t chunk, uint32_t wg,
                 Expr<u32> base, Expr<u32> limit, const std::function<Expr<f32>(Expr<u32>)>& value,
                 const std::function<Expr<u32>(Expr<u32>)>& index) {
  for_range(k.local_index() + first, chunk, wg, [&](Expr<u32> slot) {
    auto src = let("src", base + (slot - first));
    if_(src < limit, [&] {
      sv[slot] = value(src);
      si[slot] = index(src);
    }).else_([&] {
      sv[slot] = -INFINITY;
      si[slot] = kWindowNone;
    });
  }, "slot");
}

void window_top_k(KernelBuilder& k, const Shared<f32>& sv, const Shared<u32>& si, uint32_t chunk, uint32_t k_best, uint32_t wg,
                  Expr<u32> count, const std::function<Expr<f32>(Expr<u32>)>& value,
                  const std::function<Expr<u32>(Expr<u32>)>& index) {
  fill_window(k, sv, si, 0, chunk, wg, constant<u32>(0u), count, value, index);
  barrier();
  bitonic_sort(k, sv, si, chunk, wg);
  // Round r >= 1 refills slots [k_best, chunk) from chunk + (r - 1)(chunk - k_best).
  auto rounds = let("rounds", select(count <= chunk, constant<u32>(1u),
                                     1u + (count - chunk + (chunk - k_best - 1u)) / (chunk - k_best)));
  for_range(constant<u32>(1u), rounds, [&](Expr<u32> r) {
    fill_window(k, sv, si, k_best, chunk, wg, chunk + (r - 1u) * (chunk - k_best), count, value, index);
    barrier();
    bitonic_sort(k, sv, si, chunk, wg);
  }, "round");
}

Expr<f32> select_kth_largest(KernelBuilder& k, uint32_t wg, uint32_t n, Expr<f32> mine, Expr<u32> kth) {
  n = std::min(n, wg);
  auto values = k.shared<f32>("ranked_values", n);
  auto chosen = k.shared<f32>("kth_value", 1);
  auto me = k.local_index();
  auto rank_own = [&] {
    // Eight loads a round, issued before their comparisons: one shared-memory latency per eight
    // values, not one each.
    const uint32_t unroll = n % 8 == 0 ? 8 : 1;
    auto rank = k.var<u32>("rank", 0u);
    for_range(0u, n / unroll, [&](Expr<u32> r) {
      std::vector<Expr<f32>> others;
      for (uint32_t u = 0; u < unroll; ++u) others.push_back(let("other", Expr<f32>(values[r * unroll + u])));
      Expr<u32> above = constant<u32>(0u);
      for (uint32_t u = 0; u < unroll; ++u) {
        auto j = r * unroll + u;
        above = above + select(others[u] > mine || (others[u] == mine && j < me), constant<u32>(1u), constant<u32>(0u));
      }
      rank = Expr<u32>(rank) + above;
    }, "r");
    if_(Expr<u32>(rank) + 1u == kth, [&] { chosen[0u] = mine; });
  };
  if (n < wg) {
    if_(me < n, [&] { values[me] = mine; });
  } else {
    values[me] = mine;
  }
  if_(me == 0u, [&] { chosen[0u] = -INFINITY; });
  barrier();
  if (n < wg)
    if_(me < n, rank_own);
  else
    rank_own();
  barrier();
  return let("kth_largest", Expr<f32>(chosen[0u]));
}

}  // namespace bdsl::ops
