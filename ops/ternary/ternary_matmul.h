// Ternary (W1.58 A8) projections of a block of tokens for prefill: Y[tokens, rows] from I2_S
// weights as stored and per-token int8 activations (quantize_activations with one workgroup per
// token writes them). The same row dot, epilogues and fusions as ternary_matvec (see its header
// for the weight and activation layouts); each weight uvec4 a lane loads serves
// `tokens_per_workgroup` tokens, so the weights stream once per token tile instead of once per
// token. Plain (any device) or packed-dot arithmetic, chosen as in ternary_matvec.
// The tensor-core (cooperative-matrix) variant is ternary_matmul_coopmat.h; ternary_matmul_auto
// there picks it where the device lists an int8 shape.
// CPU twin: golden::bitlinear per token (golden::ternary_dot for the accumulators).
//
// Bindings, in order:
//   weights       uvec4  read    one per tensor (QKV: w_q, w_k, w_v; gate/up: w_gate, w_up)
//   x_q           uvec4  read    [tokens, cols / 16]: token t's packed int8 at uvec4 t * cols / 16
//   x_act         u32    read    [tokens, 2]: s bits, sum(q) bits per token
//   outputs       f32    write   [tokens, rows] token-major (read-write with add_residual)
//   accumulators  i32    write   [tokens, rows] (only with write_accumulators)
// Push constants: tokens (u32).
// Grid: (ternary_matvec_workgroups(target, total_rows), ceil(tokens / tokens_per_workgroup), 1).
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/attention/attention_dims.h"
#include "ops/plan.h"
#include "ops/target.h"
#include "ops/ternary/ternary_matvec.h"

namespace bdsl::ops {

struct MatmulOptions {
  MatvecOptions projection;  // input: Quantized, or NormalizeInWorkgroup (binds x and norm_weight, push eps then tokens)
  uint32_t tokens_per_workgroup = 8;  // tokens sharing each weight load (accumulators per lane)
  // > 0: the kernel serves decode steps of up to this many tokens, not prompt blocks: the
  // tensor-core variant takes tiles sized for it (coop_tiles_for_step). 1, with tiles of one
  // token: steps of one token only (token 0 a constant, as the decode step's kernels; faster
  // code than indexing by the grid), dispatched for one token.
  uint32_t step_tokens = 0;
  uint32_t step_row_subgroups = 0, step_token_subgroups = 0;  // its tiles; 0: ops/tuning.h's
  int step_double_buffer = -1;  // 0 or 1; -1: ops/tuning.h's
  // The tensor-core tiles' split of the reduction, in 128-column blocks a share (0: none; -1:
  // ops/tuning.h's, within its token and workgroup limits). A value above 0 splits whatever the
  // limits; never with the two-stage tiles.
  int step_blocks_per_split = -1;
};

dsl::Kernel ternary_matmul(const OpTarget& target, uint32_t rows, uint32_t cols, MatmulOptions options = {});
dsl::Kernel ternary_matmul_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows,
                               uint32_t cols, MatmulOptions options = {});
dsl::Kernel ternary_matmul_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, GateActivation activation,
                                   MatmulOptions options = {});
// QKV of a batch of sequences' next tokens with RoPE and the KV-cache write in the epilogue (the
// decode graph's ternary_matvec_qkv_rope for many sequences): ternary_matmul_qkv then
// rope_kv_write_sequences, bit for bit, in one dispatch. Each subgroup takes rows (2m, 2m + 1,
// 2m + half, 2m + 1 + half) of one head (options.projection.rows_per_subgroup is set to 4) for
// every token of its tile. Bindings: w_q, w_k, w_v; the input (x_q, x_act or, normalizing in the
// workgroup, x and norm_weight); sequences (u32 read [tokens][4], ops/common/step_state.h),
// rope_table (vec2 read, as rope_kv_write), y_q (f32 write [tokens, q_width]: q after RoPE),
// k_cache, v_cache (u32 write [rows, kv_words]: token t's row first_row + pos, none at a position
// past the context). Push constants: (eps,) tokens. Grid: plan_ternary_matmul_qkv_rope's (4 rows a
// subgroup, so not ternary_matmul_qkv's for the same options).
dsl::Kernel ternary_matmul_qkv_rope(const OpTarget& target, const AttentionDims& dims, uint32_t cols, uint32_t context,
                                    MatmulOptions options = {});
uint32_t ternary_matmul_token_tiles(uint32_t tokens, const MatmulOptions& options = {});

// The kernels with their grids (ops/plan.h); the grid's count is the block's tokens.
Plan plan_ternary_matmul(const OpTarget& target, uint32_t rows, uint32_t cols, const MatmulOptions& options = {});
Plan plan_ternary_matmul_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows, uint32_t cols,
                             const MatmulOptions& options = {});
Plan plan_ternary_matmul_qkv_rope(const OpTarget& target, const AttentionDims& dims, uint32_t cols, uint32_t context,
                                  const MatmulOptions& options = {});
Plan plan_ternary_matmul_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, GateActivation activation,
                                 const MatmulOptions& options = {});

}  // namespace bdsl::ops
