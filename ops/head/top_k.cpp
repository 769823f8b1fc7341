#include "ops/head/top_k.h"

#include <bit>
#include <optional>
#include <stdexcept>
#include <string>

#include "ops/common/matrix_support.h"
#include "ops/head/window_sort.h"
#include "ops/tuning.h"

namespace bdsl::ops {
using namespace bdsl::dsl;


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
  fill_window(kb, sv, si, 0, p.chunk, p.workgroup, let("begin", g * p.chunk), constant<u32>(n),
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
  fill_window(kb, sv, si, 0, p.chunk, p.workgroup, constant<u32>(0u), constant<u32>(candidates), value, index);
  barrier();
  // Round r > 0 keeps the best k and refills the other slots with the next chunk - k candidates.
  for_range(constant<u32>(0u), constant<u32>(p.rounds), [&](Expr<u32> r) {
    if_(r > 0u, [&] {
      fill_window(kb, sv, si, k, p.chunk, p.workgroup, p.chunk + (r - 1u) * (p.chunk - k), constant<u32>(candidates), value, index);
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
