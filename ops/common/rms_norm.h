// RMSNorm of each row: out = x / sqrt(mean(x^2) + eps) * weight, in fp32. One workgroup per row:
// each invocation sums the squares of a strided slice, subgroups reduce with subgroup_add, the
// per-subgroup sums meet in shared memory (one barrier), and every invocation then scales its slice.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "dsl/builder.h"
#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

// Bindings: x (read, f32 [rows, dim]), weight (read, f32 [dim]), out (write, f32 [rows, dim]).
// Push: eps (f32). Grid: rows workgroups of rms_norm_workgroup(target) invocations.
dsl::Kernel rms_norm(const OpTarget& target, uint32_t dim);

// rms_norm's arithmetic for a kernel that goes on with the normalized row (one workgroup of
// rms_norm_workgroup(target) invocations per row starting at `base`): each invocation's elements
// at[u] = lid + u * workgroup (in[u]: whether it is inside the row, where it may not be) with
// x[u] and weight[u] loaded and the row's 1 / rms `inv`; the normalized element is
// x[u] * inv * weight[u], bit for bit what rms_norm writes.
struct RmsNormSlice {
  std::vector<dsl::Expr<dsl::u32>> at;
  std::vector<std::optional<dsl::Expr<dsl::boolean>>> in;
  std::vector<dsl::Expr<dsl::f32>> x, weight;
  dsl::Expr<dsl::f32> inv;
  dsl::Expr<dsl::f32> normalized(size_t u) const { return x[u] * inv * weight[u]; }
};
RmsNormSlice emit_rms_norm_slice(dsl::KernelBuilder& k, const OpTarget& target, const dsl::Buffer<dsl::f32>& x,
                                 const dsl::Buffer<dsl::f32>& weight, dsl::Expr<dsl::u32> base, dsl::Expr<dsl::f32> eps,
                                 uint32_t dim);

uint32_t rms_norm_workgroup(const OpTarget& target);

// rms_norm with its grid (ops/plan.h); the count is the rows.
Plan plan_rms_norm(const OpTarget& target, uint32_t dim);

}  // namespace bdsl::ops
