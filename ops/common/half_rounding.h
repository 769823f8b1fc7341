// A value rounded to F16 precision and widened back to f32, as a store to an F16 buffer and a
// load would give it (pack_half2x16: round to nearest even on every device we run). Internal to ops/.
#pragma once
#include "dsl/dsl.h"

namespace bdsl::ops {

inline dsl::Expr<dsl::vec4> round_to_half(dsl::Expr<dsl::vec4> v) {
  using namespace bdsl::dsl;
  auto low = unpack_half2x16(pack_half2x16(make_vec<f32>(v.x(), v.y())));
  auto high = unpack_half2x16(pack_half2x16(make_vec<f32>(v.z(), v.w())));
  return make_vec<f32>(low.x(), low.y(), high.x(), high.y());
}

}  // namespace bdsl::ops
