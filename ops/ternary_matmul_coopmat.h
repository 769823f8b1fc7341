// Ternary (W1.58 A8) projection of a block of tokens on tensor cores: Y[tokens, rows] from I2_S
// weights as stored and per-token int8 activations, with cooperative matrices (dsl/matrix.h,
// VK_NV_cooperative_matrix s8 x s8 -> s32). The same bindings, push constant and results as
// ternary_matmul (see ternary_matmul.h and ternary_matvec.h for the layouts); only the grid differs.
// CPU twin: golden::ternary_dot per (token, row) for the accumulators, then acc / s * scale.
//
// A workgroup owns row_blocks * M rows and token_blocks * N tokens (M, N, K: the matrix shape the
// device lists, 16x8x32 or 16x16x32). Per 128-column I2_S block, all its invocations unpack the
// weights to int8 (-1, 0, +1) in shared memory (rows x 128, row-major) and the tokens' int8
// activations beside them (tokens x 128, token-major = the B matrix column-major); subgroup g then
// multiplies its M rows by every token block, K columns at a time, into int32 accumulators. So
// the int32 accumulators are exact (no sum(q) correction), as ternary_dot's. The accumulators go
// through shared memory to the epilogue: y = acc / s * scale (+ y with add_residual).
// Each subgroup is one row block: the device must run the target's subgroup size (NVIDIA: 32).
//
// Bindings, in order: w (uvec4, read), x_q (uvec4, read), x_act (u32, read), y (f32, write;
// read-write with add_residual), acc (i32, write, with write_accumulators). Push: tokens (u32).
// Grid: (ternary_matmul_coopmat_row_groups(rows), ternary_matmul_coopmat_token_groups(tokens), 1).
#pragma once
#include <cstdint>
#include <optional>

#include "dsl/dsl.h"
#include "ops/target.h"
#include "ops/ternary_matmul.h"

namespace bdsl::ops {

struct CoopMatmulOptions {
  bool add_residual = false;        // y = y + proj, y bound read-write
  bool write_accumulators = false;  // extra i32 output with the exact accumulators
  uint32_t row_blocks = 4;          // subgroups per workgroup, M rows each
  uint32_t token_blocks = 4;        // N-token accumulators per subgroup
};

// The int8 shape this op uses on the target (16x8x32, else 16x16x32), or none: then only the
// plain ternary_matmul runs there.
std::optional<MatrixShape> ternary_matmul_coopmat_shape(const OpTarget& target);

// Throws std::invalid_argument when the target lists no usable shape.
dsl::Kernel ternary_matmul_coopmat(const OpTarget& target, uint32_t rows, uint32_t cols, CoopMatmulOptions options = {});
uint32_t ternary_matmul_coopmat_row_groups(const OpTarget& target, uint32_t rows, const CoopMatmulOptions& options = {});
uint32_t ternary_matmul_coopmat_token_groups(const OpTarget& target, uint32_t tokens,
                                             const CoopMatmulOptions& options = {});

// A single-tensor prefill projection whichever variant runs: tensor cores where the target has
// them (Auto), else ternary_matmul (its dot product chosen by options.projection.dot).
enum class MatmulEngine { Auto, CooperativeMatrix, Subgroup };
struct PrefillMatmul {
  dsl::Kernel kernel;
  bool cooperative = false;
  uint32_t row_groups = 0;        // grid x
  uint32_t tokens_per_group = 0;  // grid y = token_groups(tokens)
  uint32_t token_groups(uint32_t tokens) const { return (tokens + tokens_per_group - 1) / tokens_per_group; }
};
PrefillMatmul ternary_matmul_auto(const OpTarget& target, uint32_t rows, uint32_t cols, const MatmulOptions& options = {},
                                  MatmulEngine engine = MatmulEngine::Auto);

}  // namespace bdsl::ops
