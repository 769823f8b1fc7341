// lm_head_bounds (ops/head/lm_head_pruned.h) for a batch of x on int8 tensor cores: one pass over
// the int8 shadow gives every x's bounds, each shadow row read once for up to
// kLmHeadBoundsCoopmatTokens x (lm_head_bounds with rows reads the shadow once per x). The products
// are exact int32 sums, and each bound is then lm_head_bounds' expression of the same dot:
// a_r = (f32(q_r . xq) s_r) sx, upper_r = a_r + c_r ||x|| + d_r ||x - x~|| + |a_r| 1e-6.
//
// A workgroup owns 64 shadow rows (a subgroup 16 of them) and the group's x. A block of 128
// columns at a time, the rows and the x are staged in shared memory (read from memory in whole
// uvec4, the next block's reads in flight while the tensor cores multiply this one). The
// accumulators then go through shared memory to the lanes, a row each, which write the upper
// bounds; each x's largest lower bound over the workgroup's rows is written once.
//
// Bindings, by name:
//   xq      uvec4 read   [tokens][dim / 16]: lm_head_input's int8 x, row by row
//   stats   f32   read   [tokens][4]: lm_head_input's sx and norms
//   table0  uvec4 read   the shadow, one part: [vocab][dim / 16]
//   scale   f32   read   [vocab]
//   bound   vec2  read   [vocab]
//   upper   f32   write  [tokens][stride]: x t's upper bound of row r at t * stride + r
//   lower   f32   write  [tokens][lm_head_bounds_coopmat_workgroups(target, vocab)]: each
//                        workgroup's largest lower bound for x t (lm_head_candidate_rows' lower)
// Push constants: tokens (u32), stride (u32).
// Grid: (lm_head_bounds_coopmat_workgroups(target, vocab), ceil(tokens / the group's x)).
// dim a multiple of 128; subgroups of 32.
#pragma once
#include <cstdint>
#include <optional>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

// x per grid row: the kernel's accumulators and shared memory are sized for this many.
inline constexpr uint32_t kLmHeadBoundsCoopmatTokens = 64;

// The i8 shape this op uses on the target (16x8x32, else 16x16x32, i32 accumulators), or none.
std::optional<MatrixShape> lm_head_bounds_coopmat_shape(const OpTarget& target);
// Whether it runs for this shadow: a shape, the shadow in one binding, dim % 128 == 0, subgroups
// of 32, and the shared memory a group of 64 x needs (about 19 KB).
bool lm_head_bounds_coopmat_fits(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t parts);
// `tokens`: the most x a dispatch carries (1..); a grid row takes min(tokens, 64) of them, rounded
// up to the shape's N.
dsl::Kernel lm_head_bounds_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens);
uint32_t lm_head_bounds_coopmat_workgroups(const OpTarget& target, uint32_t vocab);
// Its grid for `count` x (ops/plan.h; count >= 1).
Plan plan_lm_head_bounds_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens);

}  // namespace bdsl::ops
