#include "ops/head/top_k.h"

#include <bit>
#include <cmath>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "ops/common/matrix_support.h"
#include "ops/tuning.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr uint32_t kNone = 0xffffffffu;  // padding: value -inf, index kNone, sorts last

// a comes before b: larger value, or the same value at a lower index.
Expr<boolean> before(Expr<f32> av, Expr<u32> ai, Expr<f32> bv, Expr<u32> bi) {
  return av > bv || (av == bv && ai < bi);
}

// Sorts the window (sv, si) of `chunk` pairs descending in place. Every invocation runs it;
// one barrier per pass, each pass compares chunk / 2 disjoint pairs.
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
        auto swap = select(descending, before(bv, bi, av, ai), before(av, ai, bv, bi));
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

// Fills window slots [first, chunk) from source positions base + (slot - first) below `limit`,
// padding the rest.
void fill_window(KernelBuilder& k, const Shared<f32>& sv, const Shared<u32>& si, uint32_t first, uint32_t chunk,
                 uint32_t wg, Expr<u32> base, uint32_t limit, const std::function<Expr<f32>(Expr<u32>)>& value,
                 const std::function<Expr<u32>(Expr<u32>)>& index) {
  for_range(k.local_index() + first, chunk, wg, [&](Expr<u32> slot) {
    auto src = let("src", base + (slot - first));
    if_(src < limit, [&] {
      sv[slot] = value(src);
      si[slot] = index(src);
    }).else_([&] {
      sv[slot] = -INFINITY;
      si[slot] = kNone;
    });
  }, "slot");
}

}  // namespace

TopKPlan top_k_plan(const OpTarget& target, uint32_t n, uint32_t k) {
  if (k == 0 || k > kMaxTopK || k > n)
    throw std::invalid_argument("top_k: k " + std::to_string(k) + " must be in 1.." + std::to_string(kMaxTopK) +
                                " and at most n " + std::to_string(n));
  TopKPlan p;
  p.workgroup = subgroup_multiple_workgroup(target, tuning_for(target).top_k_workgroup);
  p.chunk = std::bit_floor(std::min<uint32_t>(4096, target.max_shared_bytes / 8));
  if (p.chunk < 2 * k)
    throw std::invalid_argument("top_k: " + std::to_string(target.max_shared_bytes) +
                                " bytes of shared memory cannot hold a window of 2k pairs");
  p.groups = ceil_div(n, p.chunk);
  const uint64_t candidates = uint64_t(p.groups) * k;
  p.rounds = candidates <= p.chunk ? 1 : 1 + ceil_div(candidates - p.chunk, p.chunk - k);
  return p;
}

Kernel top_k_partial(const OpTarget& target, uint32_t n, uint32_t k, bool rows) {
  const TopKPlan p = top_k_plan(target, n, k);
  KernelBuilder kb("top_k_partial_" + std::to_string(n) + "_k" + std::to_string(k) + (rows ? "_rows" : ""), {p.workgroup, 1, 1});
  auto values = kb.buffer<f32>("values", Access::Read);
  auto part_values = kb.buffer<f32>("part_values", Access::Write);
  auto part_indices = kb.buffer<u32>("part_indices", Access::Write);
  auto sv = kb.shared<f32>("window_values", p.chunk);
  auto si = kb.shared<u32>("window_indices", p.chunk);
  // With rows: row y's values start at y * stride, its candidates at y * groups * k.
  std::optional<Expr<u32>> first;
  if (rows) first = let("row_start", kb.workgroup_id().y() * kb.push<u32>("stride"));
  auto at = [&](Expr<u32> j) { return first ? *first + j : j; };
  auto g = kb.workgroup_id().x();
  auto out = rows ? let("out", (kb.workgroup_id().y() * p.groups + g) * k) : g * k;
  fill_window(kb, sv, si, 0, p.chunk, p.workgroup, let("begin", g * p.chunk), n,
              [&](Expr<u32> j) { return Expr<f32>(values[at(j)]); }, [](Expr<u32> j) { return j; });
  barrier();
  bitonic_sort(kb, sv, si, p.chunk, p.workgroup);
  for_range(kb.local_index(), k, p.workgroup, [&](Expr<u32> r) {
    part_values[out + r] = sv[r];
    part_indices[out + r] = si[r];
  }, "r");
  return kb.build();
}

Kernel top_k_merge(const OpTarget& target, uint32_t n, uint32_t k, bool rows) {
  const TopKPlan p = top_k_plan(target, n, k);
  const uint32_t candidates = p.groups * k;
  KernelBuilder kb("top_k_merge_" + std::to_string(n) + "_k" + std::to_string(k) + (rows ? "_rows" : ""), {p.workgroup, 1, 1});
  auto part_values = kb.buffer<f32>("part_values", Access::Read);
  auto part_indices = kb.buffer<u32>("part_indices", Access::Read);
  auto top_values = kb.buffer<f32>("top_values", Access::Write);
  auto top_indices = kb.buffer<u32>("top_indices", Access::Write);
  auto sv = kb.shared<f32>("window_values", p.chunk);
  auto si = kb.shared<u32>("window_indices", p.chunk);
  // With rows: row y's candidates at y * groups * k, its top k at y * k.
  std::optional<Expr<u32>> first, out;
  if (rows) {
    first = let("first", kb.workgroup_id().y() * candidates);
    out = let("out", kb.workgroup_id().y() * k);
  }
  auto value = [&](Expr<u32> j) { return Expr<f32>(part_values[first ? *first + j : j]); };
  auto index = [&](Expr<u32> j) { return Expr<u32>(part_indices[first ? *first + j : j]); };
  fill_window(kb, sv, si, 0, p.chunk, p.workgroup, constant<u32>(0u), candidates, value, index);
  barrier();
  // Round r > 0 keeps the best k and refills the other slots with the next chunk - k candidates.
  for_range(constant<u32>(0u), constant<u32>(p.rounds), [&](Expr<u32> r) {
    if_(r > 0u, [&] {
      fill_window(kb, sv, si, k, p.chunk, p.workgroup, p.chunk + (r - 1u) * (p.chunk - k), candidates, value, index);
      barrier();
    });
    bitonic_sort(kb, sv, si, p.chunk, p.workgroup);
  }, "round");
  for_range(kb.local_index(), k, p.workgroup, [&](Expr<u32> r) {
    top_values[out ? *out + r : r] = sv[r];
    top_indices[out ? *out + r : r] = si[r];
  }, "r");
  return kb.build();
}

Plan plan_top_k_partial(const OpTarget& target, uint32_t n, uint32_t k, bool rows) {
  const uint32_t groups = top_k_plan(target, n, k).groups;
  return {top_k_partial(target, n, k, rows), [groups](uint32_t count) { return rt::Grid{groups, count}; }};
}

Plan plan_top_k_merge(const OpTarget& target, uint32_t n, uint32_t k, bool rows) {
  return {top_k_merge(target, n, k, rows), [](uint32_t count) { return rt::Grid{1, count}; }};
}

}  // namespace bdsl::ops
