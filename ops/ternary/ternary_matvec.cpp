#include "ops/ternary/ternary_matvec.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ops/common/matrix_support.h"
#include "ops/ternary/ternary_projection.h"

namespace bdsl::ops {
using namespace bdsl::dsl;


uint32_t ternary_matvec_workgroup(const OpTarget& target) { return ternary_matvec_workgroup(target, MatvecOptions{}); }

// 256 invocations for both inputs: 1024-invocation workgroups for the in-workgroup norm (fewer
// workgroups re-reading x) measured slower (bench/RESULTS.md, "Behind the code").
uint32_t ternary_matvec_workgroup(const OpTarget& target, const MatvecOptions& options) {
  if (options.workgroup == 0) return subgroup_multiple_workgroup(target, 256);
  if (options.workgroup > target.max_workgroup_invocations || options.workgroup % std::max(1u, target.subgroup_size) != 0)
    throw std::invalid_argument("ternary_matvec: workgroup " + std::to_string(options.workgroup) +
                                " is not whole subgroups within the device's limit");
  return options.workgroup;
}

uint32_t ternary_matvec_workgroups(const OpTarget& target, uint32_t total_rows) {
  return ternary_matvec_workgroups(target, total_rows, MatvecOptions{});
}

uint32_t ternary_matvec_workgroups(const OpTarget& target, uint32_t total_rows, const MatvecOptions& options) {
  return ceil_div(total_rows,
                  uint64_t(rows_per_workgroup(target, ternary_matvec_workgroup(target, options))) * std::max(1u, options.rows_per_subgroup));
}

Kernel ternary_matvec(const OpTarget& target, uint32_t rows, uint32_t cols, MatvecOptions options) {
  return detail::build_ternary_projection(target, "ternary_matvec", {{"w", rows}}, cols, detail::kSeparate, options, 0);
}

Kernel ternary_matvec_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows, uint32_t cols,
                          MatvecOptions options) {
  if (options.add_residual) throw std::invalid_argument("ternary_matvec_qkv: no residual for Q, K and V");
  return detail::build_ternary_projection(target, "ternary_matvec_qkv", {{"q", q_rows}, {"k", k_rows}, {"v", v_rows}},
                                          cols, detail::kSeparate, options, 0);
}

Kernel ternary_matvec_qkv_rope(const OpTarget& target, const AttentionDims& dims, uint32_t cols, uint32_t context,
                               MatvecOptions options) {
  dims.check("ternary_matvec_qkv_rope");
  options.rows_per_subgroup = 4;
  const detail::RopeKvEpilogue rope{dims, context};
  return detail::build_ternary_projection(target, "ternary_matvec_qkv", {{"q", dims.q_width()}, {"k", dims.kv_width()}, {"v", dims.kv_width()}},
                                          cols, detail::kSeparate, options, 0, &rope);
}

uint32_t ternary_matvec_qkv_rope_workgroups(const OpTarget& target, const AttentionDims& dims, MatvecOptions options) {
  options.rows_per_subgroup = 4;
  return ternary_matvec_workgroups(target, dims.q_width() + 2 * dims.kv_width(), options);
}

Kernel ternary_matvec_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, GateActivation activation,
                              MatvecOptions options) {
  return detail::build_ternary_projection(target, "ternary_matvec_" + to_string(activation) + "_gate_up",
                                          {{"gate", rows}, {"up", rows}}, cols, activation, options, 0);
}


}  // namespace bdsl::ops

namespace bdsl::ops {

Plan plan_ternary_matvec(const OpTarget& target, uint32_t rows, uint32_t cols, const MatvecOptions& options) {
  return {ternary_matvec(target, rows, cols, options), fixed_grid({ternary_matvec_workgroups(target, rows, options)})};
}

Plan plan_ternary_matvec_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows, uint32_t cols,
                             const MatvecOptions& options) {
  return {ternary_matvec_qkv(target, q_rows, k_rows, v_rows, cols, options),
          fixed_grid({ternary_matvec_workgroups(target, q_rows + k_rows + v_rows, options)})};
}

Plan plan_ternary_matvec_qkv_rope(const OpTarget& target, const AttentionDims& dims, uint32_t cols, uint32_t context,
                                  const MatvecOptions& options) {
  return {ternary_matvec_qkv_rope(target, dims, cols, context, options),
          fixed_grid({ternary_matvec_qkv_rope_workgroups(target, dims, options)})};
}

// One subgroup computes row r of both gate and up: the grid covers `rows` rows.
Plan plan_ternary_matvec_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, GateActivation activation,
                                 const MatvecOptions& options) {
  return {ternary_matvec_gate_up(target, rows, cols, activation, options), fixed_grid({ternary_matvec_workgroups(target, rows, options)})};
}

}  // namespace bdsl::ops
