#include "ops/ternary/ternary_matmul.h"

#include <stdexcept>

#include "ops/common/matrix_support.h"
#include "ops/ternary/ternary_projection.h"

namespace bdsl::ops {

namespace {
uint32_t tile(const MatmulOptions& o) {
  if (o.tokens_per_workgroup == 0) throw std::invalid_argument("ternary_matmul: tokens_per_workgroup must be positive");
  return o.tokens_per_workgroup;
}
}  // namespace

uint32_t ternary_matmul_token_tiles(uint32_t tokens, const MatmulOptions& options) {
  return ceil_div(tokens, tile(options));
}

dsl::Kernel ternary_matmul(const OpTarget& target, uint32_t rows, uint32_t cols, MatmulOptions options) {
  return detail::build_ternary_projection(target, "ternary_matmul", {{"w", rows}}, cols,
                                          detail::ProjectionCombine::Separate, options.projection, tile(options));
}

dsl::Kernel ternary_matmul_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows,
                               uint32_t cols, MatmulOptions options) {
  if (options.projection.add_residual) throw std::invalid_argument("ternary_matmul_qkv: no residual for Q, K and V");
  return detail::build_ternary_projection(target, "ternary_matmul_qkv", {{"q", q_rows}, {"k", k_rows}, {"v", v_rows}},
                                          cols, detail::ProjectionCombine::Separate, options.projection, tile(options));
}

dsl::Kernel ternary_matmul_relu2_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, MatmulOptions options) {
  return detail::build_ternary_projection(target, "ternary_matmul_relu2_gate_up", {{"gate", rows}, {"up", rows}}, cols,
                                          detail::ProjectionCombine::Relu2Product, options.projection, tile(options));
}

}  // namespace bdsl::ops
