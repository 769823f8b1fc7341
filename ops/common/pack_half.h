// f32 values rounded to F16 and packed two to a 32-bit word (packHalf2x16: the first value in the
// low half), as an F16 array that a kernel with 16-bit storage reads (ops/head/lm_head_coopmat.h).
// Needs no 16-bit feature itself. CPU twin: numerics::f32_to_f16 per value.
//
// Bindings, by name: x (vec4, read, [count * 4] floats), y (uvec2, write, [count]: four halves each).
// Push constants: count (u32, vec4s). Grid: (ceil(count / pack_half_workgroup(target)), 1, 1).
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

dsl::Kernel pack_half(const OpTarget& target);
uint32_t pack_half_workgroup(const OpTarget& target);
// With its grid (ops/plan.h); the count is the vec4s (push constant count).
Plan plan_pack_half(const OpTarget& target);

}  // namespace bdsl::ops
