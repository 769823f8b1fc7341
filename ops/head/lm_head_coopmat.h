// The LM head of a decode step on tensor cores: logits[t][r] = table[r] . f16(x[t]), the F16
// table (tied embedding) as stored, x rounded to F16 (ops/common/pack_half.h writes it), products
// summed in f32 by the cooperative matrices (VK_NV_cooperative_matrix f16 x f16 + f32). Rounding
// x to F16 is where ggml's CPU path (bitnet.cpp) rounds it for an F16 weight; lm_head keeps x in
// f32, so the logits of the two differ by that rounding. A logit is the same whatever the other
// tokens of the step are: a column of a product depends on its own token only, and every token
// runs the same products in the same order.
//
// A subgroup owns 16 rows and multiplies them with every token tile of the step, K = 16 columns
// at a time, the table tile loaded straight from memory (each row is read once) and the x tiles
// from memory too (L1/L2: the step's x is small). No shared memory, no barrier.
//
// Bindings, by name:
//   x       f16  read   [token_tiles * N, dim], token-major (rows past the step's tokens: any value)
//   table0  f16  read   the whole table, [vocab, dim] (one part)
//   logits  f32  write  [token_tiles * N, stride]: row r of token t at t * stride + r
// Push constants: stride (u32, a multiple of 8). vocab >= 16, dim a multiple of 16.
// Grid: (lm_head_coopmat_workgroups(target, vocab), 1, 1). Tokens 0 .. lm_head_coopmat_tokens - 1
// are computed: the callers' x and logits hold that many rows.
#pragma once
#include <cstdint>
#include <optional>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

// The f16 shape this op uses on the target (16x8x16, else 16x16x16, f32 accumulators), or none.
std::optional<MatrixShape> lm_head_coopmat_shape(const OpTarget& target);
// Whether it runs for this table: a shape, and the table in one binding.
bool lm_head_coopmat_fits(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t parts);
// `tokens`: the step's tokens (1..); the kernel computes them rounded up to the shape's N.
dsl::Kernel lm_head_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens);
uint32_t lm_head_coopmat_tokens(const OpTarget& target, uint32_t tokens);
uint32_t lm_head_coopmat_workgroups(const OpTarget& target, uint32_t vocab);
Plan plan_lm_head_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens);  // ops/plan.h

}  // namespace bdsl::ops
