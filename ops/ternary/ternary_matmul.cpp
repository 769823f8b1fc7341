#include "ops/ternary/ternary_matmul.h"

#include <stdexcept>
#include <string>

#include "ops/common/matrix_support.h"
#include "ops/ternary/ternary_projection.h"

namespace bdsl::ops {

namespace {
uint32_t tile(const MatmulOptions& o) {
  if (o.tokens_per_workgroup == 0) throw std::invalid_argument("ternary_matmul: tokens_per_workgroup must be positive");
  return o.tokens_per_workgroup;
}
// A kernel for decode steps of one token (MatmulOptions::step_tokens 1, tiles of one).
bool one_token_step(const MatmulOptions& o) { return o.step_tokens == 1 && tile(o) == 1; }
}  // namespace

uint32_t ternary_matmul_token_tiles(uint32_t tokens, const MatmulOptions& options) {
  return ceil_div(tokens, tile(options));
}

dsl::Kernel ternary_matmul(const OpTarget& target, uint32_t rows, uint32_t cols, MatmulOptions options) {
  return detail::build_ternary_projection(target, "ternary_matmul", {{"w", rows}}, cols,
                                          detail::kSeparate, options.projection, tile(options), nullptr, one_token_step(options));
}

dsl::Kernel ternary_matmul_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows,
                               uint32_t cols, MatmulOptions options) {
  if (options.projection.add_residual) throw std::invalid_argument("ternary_matmul_qkv: no residual for Q, K and V");
  return detail::build_ternary_projection(target, "ternary_matmul_qkv", {{"q", q_rows}, {"k", k_rows}, {"v", v_rows}},
                                          cols, detail::kSeparate, options.projection, tile(options), nullptr, one_token_step(options));
}

namespace {
MatmulOptions quads(MatmulOptions options) {
  options.projection.rows_per_subgroup = 4;  // one RoPE quad of a head
  return options;
}
}  // namespace

dsl::Kernel ternary_matmul_qkv_rope(const OpTarget& target, const AttentionDims& dims, uint32_t cols, uint32_t context,
                                    MatmulOptions options) {
  dims.check("ternary_matmul_qkv_rope");
  options = quads(options);
  const detail::RopeKvEpilogue rope{dims, context};
  return detail::build_ternary_projection(target, "ternary_matmul_qkv",
                                          {{"q", dims.q_width()}, {"k", dims.kv_width()}, {"v", dims.kv_width()}}, cols,
                                          detail::kSeparate, options.projection, tile(options), &rope, one_token_step(options));
}

dsl::Kernel ternary_matmul_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, GateActivation activation,
                                   MatmulOptions options) {
  return detail::build_ternary_projection(target, "ternary_matmul_" + to_string(activation) + "_gate_up",
                                          {{"gate", rows}, {"up", rows}}, cols, activation,
                                          options.projection, tile(options), nullptr, one_token_step(options));
}

namespace {
// Rows of the projection's tensors over matvec workgroups, tokens over token tiles.
GridRule matmul_grid(const OpTarget& target, uint32_t total_rows, const MatmulOptions& options) {
  const uint32_t row_groups = ternary_matvec_workgroups(target, total_rows, options.projection);
  return [row_groups, options](uint32_t tokens) {
    if (one_token_step(options) && tokens != 1)
      throw std::invalid_argument("ternary_matmul for steps of one token dispatched for " + std::to_string(tokens));
    return rt::Grid{row_groups, ternary_matmul_token_tiles(tokens, options)};
  };
}
}  // namespace

Plan plan_ternary_matmul(const OpTarget& target, uint32_t rows, uint32_t cols, const MatmulOptions& options) {
  return {ternary_matmul(target, rows, cols, options), matmul_grid(target, rows, options)};
}

Plan plan_ternary_matmul_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows, uint32_t cols,
                             const MatmulOptions& options) {
  return {ternary_matmul_qkv(target, q_rows, k_rows, v_rows, cols, options),
          matmul_grid(target, q_rows + k_rows + v_rows, options)};
}

Plan plan_ternary_matmul_qkv_rope(const OpTarget& target, const AttentionDims& dims, uint32_t cols, uint32_t context,
                                  const MatmulOptions& options) {
  return {ternary_matmul_qkv_rope(target, dims, cols, context, options),
          matmul_grid(target, dims.q_width() + 2 * dims.kv_width(), quads(options))};
}

// One subgroup computes row r of both gate and up: the grid covers `rows` rows.
Plan plan_ternary_matmul_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, GateActivation activation,
                                 const MatmulOptions& options) {
  return {ternary_matmul_gate_up(target, rows, cols, activation, options), matmul_grid(target, rows, options)};
}

}  // namespace bdsl::ops
