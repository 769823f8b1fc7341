// A value rounded to F16 precision (round to nearest even, F16 subnormals and overflow to inf
// included) and kept in f32: what numerics::f32_to_f16 then f16_to_f32 give on the host. Written
// with integer and exact float operations, not unpackHalf2x16(packHalf2x16(x)), which a driver
// may fold into x (NVIDIA's does). Internal to ops/.
#pragma once
#include <cmath>

#include "dsl/dsl.h"

namespace bdsl::ops {

inline dsl::Expr<dsl::f32> round_to_half(dsl::Expr<dsl::f32> x) {
  using namespace bdsl::dsl;
  auto bits = let("half_bits", bitcast<u32>(x));
  auto magnitude = let("half_abs", bits & 0x7FFFFFFFu);
  // Normal: drop 13 mantissa bits, ties to even (a carry into the exponent is the right answer).
  auto normal = bitcast<f32>(((bits + 0xFFFu + ((bits >> 13u) & 1u)) & 0xFFFFE000u));
  // Below 2^-14 the F16 step is 2^-24: scale, round to an integer (ties even), scale back, exactly.
  auto subnormal = round(x * 16777216.0f) * (1.0f / 16777216.0f);
  auto finite = select(magnitude < 0x38800000u, subnormal, normal);
  return select(magnitude >= 0x477FF000u && magnitude <= 0x7F800000u, x * INFINITY, finite);  // >= 65520: inf
}

inline dsl::Expr<dsl::vec4> round_to_half(dsl::Expr<dsl::vec4> v) {
  using namespace bdsl::dsl;
  return make_vec<f32>(round_to_half(v.x()), round_to_half(v.y()), round_to_half(v.z()), round_to_half(v.w()));
}

}  // namespace bdsl::ops
