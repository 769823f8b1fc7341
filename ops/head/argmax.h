// Greedy sampling: the index of the largest value (the lowest such index on ties) over the whole
// vocabulary, so only one u32 is read back per token. Two dispatches with a fixed grid: each
// workgroup of argmax_partial reduces a chunk to (value, index), argmax_final reduces those.
// CPU twin: golden::argmax (reference_model.h). NaN values are not expected and not ordered.
//
// argmax_partial(target, n):
//   bindings  0 values        f32 read   [n]
//             1 part_values   f32 write  [plan.groups]
//             2 part_indices  u32 write  [plan.groups]
//   push constants: none.   grid: (plan.groups, 1, 1); workgroup g covers [g * chunk, (g+1) * chunk)
// argmax_final(target, n):
//   bindings  0 part_values   f32 read   [plan.groups]
//             1 part_indices  u32 read   [plan.groups]
//             2 token         u32 write  [1]
//   with advance_context > 0 (the decode graph feeding itself, ops/common/step_state.h), also:
//             3 step          u32 read-write  [4]: token <- the argmax, pos <- pos + 1, epoch + 1
//             4 generated     u32 write  [advance_context]: generated[pos] <- the argmax (pos in range)
//   so the next replay decodes this step's choice with no host write in between.
//   push constants: none.   grid: (1, 1, 1)
// With rows (many sequences' logits in one buffer, one dispatch each for all): grid y = the rows;
// argmax_partial takes push constant stride (u32: row y's values start at y * stride) and writes
// row y's partials at y * plan.groups; argmax_final reads them there and writes token[y].
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

struct ArgmaxPlan {
  uint32_t workgroup = 0;  // invocations
  uint32_t chunk = 0;      // values per partial workgroup
  uint32_t groups = 0;     // partial workgroups (= partial results)
};

ArgmaxPlan argmax_plan(const OpTarget& target, uint32_t n);
dsl::Kernel argmax_partial(const OpTarget& target, uint32_t n, bool rows = false);
dsl::Kernel argmax_final(const OpTarget& target, uint32_t n, uint32_t advance_context = 0, bool rows = false);
// Both with their grids (ops/plan.h); the count is the rows (1 without rows).
Plan plan_argmax_partial(const OpTarget& target, uint32_t n, bool rows = false);
Plan plan_argmax_final(const OpTarget& target, uint32_t n, uint32_t advance_context = 0, bool rows = false);

// For kernels that end in an argmax of their own (ops/head/lm_head_pruned.h), with the same order:
inline constexpr uint32_t kArgmaxNone = 0xffffffffu;  // no index yet: loses to any real candidate
// (v, i) beats (best_v, best_i): larger value, or the same value at a lower index.
dsl::Expr<dsl::boolean> argmax_beats(dsl::Expr<dsl::f32> v, dsl::Expr<dsl::u32> i, dsl::Expr<dsl::f32> best_v,
                                     dsl::Expr<dsl::u32> best_i);
// Each invocation's (value, index) -> the workgroup's best, in every invocation. One barrier.
std::pair<dsl::Expr<dsl::f32>, dsl::Expr<dsl::u32>> workgroup_argmax_combine(dsl::KernelBuilder& k, uint32_t wg,
                                                                             dsl::Expr<dsl::f32> value,
                                                                             dsl::Expr<dsl::u32> index);
// Every invocation scans [begin, end) with stride wg; the workgroup's best (value(j), index(j)) is
// returned to every invocation. One barrier.
std::pair<dsl::Expr<dsl::f32>, dsl::Expr<dsl::u32>> workgroup_argmax(
    dsl::KernelBuilder& k, uint32_t wg, dsl::Expr<dsl::u32> begin, dsl::Expr<dsl::u32> end,
    const std::function<dsl::Expr<dsl::f32>(dsl::Expr<dsl::u32>)>& value,
    const std::function<dsl::Expr<dsl::u32>(dsl::Expr<dsl::u32>)>& index);
// argmax_final's second pass inside another kernel: its bindings (token, then with
// advance_context step and generated) declared in that order, and its body over `groups`
// partials (run by one whole workgroup of `wg` invocations).
struct ArgmaxFinalBindings {
  dsl::Buffer<dsl::u32> token;
  std::optional<dsl::Buffer<dsl::u32>> step, generated;
  uint32_t advance_context = 0;
};
ArgmaxFinalBindings declare_argmax_final(dsl::KernelBuilder& k, uint32_t advance_context);
void emit_argmax_final(dsl::KernelBuilder& k, uint32_t wg, uint32_t groups, const dsl::Buffer<dsl::f32>& part_values,
                       const dsl::Buffer<dsl::u32>& part_indices, const ArgmaxFinalBindings& b);
// The same by one subgroup, with no barrier (for a branch that not every invocation takes);
// returns the index (the same in every lane). With `row`: that row's partials (at row * groups)
// and token (as argmax_final with rows).
dsl::Expr<dsl::u32> emit_argmax_final_in_subgroup(dsl::KernelBuilder& k, uint32_t groups, const dsl::Buffer<dsl::f32>& part_values,
                                   const dsl::Buffer<dsl::u32>& part_indices, const ArgmaxFinalBindings& b,
                                   std::optional<dsl::Expr<dsl::u32>> row = std::nullopt);

}  // namespace bdsl::ops
