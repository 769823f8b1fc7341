// Ternary (W1.58 A8) projection of a block of tokens on tensor cores: Y[tokens, rows] from I2_S
// weights as stored and per-token int8 activations, with cooperative matrices (dsl/matrix.h,
// VK_NV_cooperative_matrix s8 x s8 -> s32). The same bindings, push constant and results as
// ternary_matmul (see ternary_matmul.h and ternary_matvec.h for the layouts); only the grid differs.
// CPU twin: golden::ternary_dot per (token, row) for the accumulators, then acc / s * scale.
//
// A workgroup owns row_subgroups x token_subgroups subgroups; each multiplies row_tiles M-row
// tiles by token_tiles N-token tiles (M, N, K: the shape the device lists, 16x8x32 or 16x16x32),
// so by default 128 rows x 64 tokens per workgroup, 8 int32 accumulators per subgroup. Per
// 128-column I2_S block, the workgroup writes the weights to shared memory as int8 -1/0/+1 a
// 32-bit word at a time (4 codes per word with a few bit operations) and the tokens' int8
// activations as they are, then each subgroup runs 4 K steps of row_tiles x token_tiles products;
// the next block's global reads are in flight meanwhile. The int32 accumulators are exact (no
// sum(q) correction), as ternary_dot's; they go through shared memory to the epilogue:
// y = acc / s * scale (+ y with add_residual), in passes of a few token tiles where all of them
// would not fit (a 128 x 128 tile on NVIDIA's 48 KiB: two).
// The device must run the target's subgroup size (NVIDIA: 32).
//
// With k_splits S > 1 the grid's z splits the blocks S ways: each workgroup adds its int32
// accumulators to `totals` with atomic adds (exact in any order) and counts itself on its tile's
// ticket; the last of the S runs the epilogue on the totals, taking each back to zero (atomic
// exchange) and the ticket too, for the next dispatch. The same bits as S = 1.
//
// Bindings, in order: w (uvec4, read; with gate_up w_gate and w_up), x_q (uvec4, read), x_act (u32, read), y (f32, write;
// read-write with add_residual), acc (i32, write, with write_accumulators); with k_splits > 1
// totals (i32 read-write, [tokens * rows], zero before the first dispatch, left zero) and tickets
// (u32 read-write, [row groups * token groups], likewise). Push: tokens (u32).
// Grid: (ternary_matmul_coopmat_row_groups(rows), ternary_matmul_coopmat_token_groups(tokens), k_splits).
#pragma once
#include <cstdint>
#include <optional>

#include "dsl/dsl.h"
#include "ops/common/gate_activation.h"
#include "ops/target.h"
#include "ops/ternary/ternary_matmul.h"
#include "ops/tuning.h"

namespace bdsl::ops {

// The tile (ops/tuning.h's CoopTile: subgroups, tiles per subgroup, stages) and the epilogue.
struct CoopMatmulOptions : CoopTile {
  bool add_residual = false;        // y = y + proj, y bound read-write
  bool write_accumulators = false;  // extra i32 output with the exact accumulators
  // Gate and up in one dispatch: a workgroup's first half of rows are gate's, the second half up's
  // (the same output rows), and the epilogue writes y = act(gate) * up once (ops/common/
  // gate_activation.h), bit for bit what the two projections and ffn_sub_norm's quantize (which
  // forms the product) give. Binds w_gate and w_up in place of w. Not with add_residual,
  // write_accumulators or k_splits.
  std::optional<GateActivation> gate_up;
};

// The int8 shape this op uses on the target (16x8x32, else 16x16x32), or none: then only the
// plain ternary_matmul runs there.
std::optional<MatrixShape> ternary_matmul_coopmat_shape(const OpTarget& target);

// Throws std::invalid_argument when the target lists no usable shape.
dsl::Kernel ternary_matmul_coopmat(const OpTarget& target, uint32_t rows, uint32_t cols, CoopMatmulOptions options = {});
// rows: the output's (with gate_up each of gate's and up's, a workgroup taking half its tile's rows of each).
uint32_t ternary_matmul_coopmat_row_groups(const OpTarget& target, uint32_t rows, const CoopMatmulOptions& options = {});
uint32_t ternary_matmul_coopmat_token_groups(const OpTarget& target, uint32_t tokens,
                                             const CoopMatmulOptions& options = {});

// The tile ternary_matmul_auto gives a rows x cols projection of a prompt block (ops/tuning.h's
// coop_tile_short, _tall or _deep for the device).
CoopMatmulOptions coop_tiles_for(const OpTarget& target, uint32_t rows, uint32_t cols);
// The tiles for a decode step of `tokens` tokens (1..): one token group covering them all, and
// small row tiles (ops/tuning.h, step_coop_*) so that the few tokens still give many workgroups.
// row_subgroups, token_subgroups: 0 takes the table's.
CoopMatmulOptions coop_tiles_for_step(const OpTarget& target, uint32_t tokens, uint32_t row_subgroups = 0,
                                      uint32_t token_subgroups = 0, int double_buffer = -1);

// A single-tensor prefill projection whichever variant runs: tensor cores where the target has
// them (Auto), else ternary_matmul (its dot product chosen by options.projection.dot).
enum class MatmulEngine { Auto, CooperativeMatrix, Subgroup };
struct PrefillMatmul {
  dsl::Kernel kernel;
  bool cooperative = false;
  uint32_t row_groups = 0;        // grid x
  uint32_t tokens_per_group = 0;  // grid y = token_groups(tokens)
  uint32_t k_splits = 1;          // grid z; above 1 the kernel binds totals and tickets (see above)
  uint32_t token_groups(uint32_t tokens) const { return (tokens + tokens_per_group - 1) / tokens_per_group; }
};
PrefillMatmul ternary_matmul_auto(const OpTarget& target, uint32_t rows, uint32_t cols, const MatmulOptions& options = {},
                                  MatmulEngine engine = MatmulEngine::Auto);
// As plans (ops/plan.h); the grid's count is the block's tokens.
Plan plan_ternary_matmul_coopmat(const OpTarget& target, uint32_t rows, uint32_t cols, const CoopMatmulOptions& options = {});
Plan plan_ternary_matmul_auto(const OpTarget& target, uint32_t rows, uint32_t cols, const MatmulOptions& options = {},
                              MatmulEngine engine = MatmulEngine::Auto);

}  // namespace bdsl::ops
