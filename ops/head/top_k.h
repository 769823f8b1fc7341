// The k largest values (k up to 128, at most n) with their indices, sorted descending, ties by
// the lower index, for sampling: only k pairs are read back per token. Two dispatches with a
// fixed grid: each workgroup of top_k_partial bitonic-sorts one chunk of the values in shared
// memory and keeps its first k; top_k_merge sorts the groups' candidates in one workgroup, a
// shared-memory window at a time (keep the best k, refill the rest, sort again).
// CPU twin: a std::partial_sort with the same order (tests/ops_head/argmax_top_k_test.cpp); golden/
// has none. NaN values are not expected and not ordered.
//
// top_k_partial(target, n, k):
//   bindings  0 values        f32 read   [n]
//             1 part_values   f32 write  [plan.groups * k]
//             2 part_indices  u32 write  [plan.groups * k]
//   push constants: none.   grid: (plan.groups, 1, 1); workgroup g sorts [g * chunk, (g+1) * chunk)
// top_k_merge(target, n, k):
//   bindings  0 part_values   f32 read   [plan.groups * k]
//             1 part_indices  u32 read   [plan.groups * k]
//             2 top_values    f32 write  [k]
//             3 top_indices   u32 write  [k]
//   push constants: none.   grid: (1, 1, 1)
// With rows (many sequences' logits in one buffer, one dispatch each for all): grid y = the rows;
// top_k_partial takes push constant stride (u32: row y's values start at y * stride) and writes
// row y's candidates at y * plan.groups * k; top_k_merge reads them there and writes row y's k
// pairs at y * k.
// The chunk is the largest power of two whose (value, index) pairs fit the shared memory, at most
// 4096 and at least 2k (16 KiB: 2048; 32 KiB or more: 4096).
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

struct TopKPlan {
  uint32_t workgroup = 0;  // invocations
  uint32_t chunk = 0;      // values per partial workgroup = the shared sort window
  uint32_t groups = 0;     // partial workgroups
  uint32_t rounds = 0;     // sorts of the window in top_k_merge
};

inline constexpr uint32_t kMaxTopK = 128;

TopKPlan top_k_plan(const OpTarget& target, uint32_t n, uint32_t k);
dsl::Kernel top_k_partial(const OpTarget& target, uint32_t n, uint32_t k, bool rows = false);
dsl::Kernel top_k_merge(const OpTarget& target, uint32_t n, uint32_t k, bool rows = false);
// Both with their grids (ops/plan.h); the count is the rows (1 without rows).
Plan plan_top_k_partial(const OpTarget& target, uint32_t n, uint32_t k, bool rows = false);
Plan plan_top_k_merge(const OpTarget& target, uint32_t n, uint32_t k, bool rows = false);

}  // namespace bdsl::ops
