// lm_head_bounds (ops/head/lm_head_pruned.h) for a batch of x on int8 tensor cores: one pass over
// the int8 shadow gives every x's bounds, each shadow row read once for up to
// kLmHeadBoundsCoopmatTokens x (the row-per-x kernel reads the shadow once per x). The products are
// exact int32 sums, and each bound is then lm_head_bounds' expression of the same dot:
// a_r = (f32(q_r . xq) s_r) sx, upper_r = a_r + c_r ||x|| + d_r ||x - x~|| + |a_r| 1e-6.
//
// A subgroup owns 32 rows at a time (two 16-row tiles) and multiplies them with every token tile
// of its group, K = 32 columns at a time, the shadow tiles loaded straight from memory and the x
// tiles from memory too (L1/L2: the batch's x is small). The accumulators go through shared
// memory to the lanes, one row each, which write the upper bounds and keep each token's largest
// lower bound.
//
// Bindings, by name:
//   xq      uvec4 read   [lm_head_bounds_coopmat_rows(target, tokens)][dim / 16]: lm_head_input's
//                        int8 x, row by row (rows past the tokens: any value)
//   stats   f32   read   [tokens][4]: lm_head_input's sx and norms
//   table0  uvec4 read   the shadow, one part: [vocab][dim / 16]
//   scale   f32   read   [vocab]
//   bound   vec2  read   [vocab]
//   upper   f32   write  [tokens][stride]: x t's upper bound of row r at t * stride + r
//   lower   f32   write  [tokens][lm_head_bounds_coopmat_workgroups(target, vocab)]: each
//                        workgroup's largest lower bound for x t (lm_head_candidate_rows' lower)
// Push constants: tokens (u32), stride (u32).
// Grid: (lm_head_bounds_coopmat_workgroups(target, vocab), ceil(tokens / kLmHeadBoundsCoopmatTokens)).
// vocab >= 32, dim a multiple of 64.
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
// Whether it runs for this shadow: a shape, the shadow in one binding, vocab >= 32, dim % 64 == 0.
bool lm_head_bounds_coopmat_fits(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t parts);
// `tokens`: the most x a dispatch carries (1..); the kernel computes min(tokens, 64) rounded up
// to the shape's N per grid row.
dsl::Kernel lm_head_bounds_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens);
// Rows of xq the kernel reads for `tokens` x (the last grid row's whole token tiles).
uint32_t lm_head_bounds_coopmat_rows(const OpTarget& target, uint32_t tokens);
uint32_t lm_head_bounds_coopmat_workgroups(const OpTarget& target, uint32_t vocab);
// Grid for `count` x.
Plan plan_lm_head_bounds_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens);  // ops/plan.h

}  // namespace bdsl::ops
