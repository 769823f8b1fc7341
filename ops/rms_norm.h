// RMSNorm of each row: out = x / sqrt(mean(x^2) + eps) * weight, in fp32. One workgroup per row:
// each invocation sums the squares of a strided slice, subgroups reduce with subgroup_add, the
// per-subgroup sums meet in shared memory (one barrier), and every invocation then scales its slice.
#pragma once
#include <cstdint>

#include "dsl/builder.h"
#include "ops/target.h"

namespace bdsl::ops {

// Bindings: x (read, f32 [rows, dim]), weight (read, f32 [dim]), out (write, f32 [rows, dim]).
// Push: eps (f32). Grid: rows workgroups of rms_norm_workgroup(target) invocations.
dsl::Kernel rms_norm(const OpTarget& target, uint32_t dim);

uint32_t rms_norm_workgroup(const OpTarget& target);

}  // namespace bdsl::ops
