#include "ops/common/pack_half.h"

#include <algorithm>

#include "ops/common/matrix_support.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

uint32_t pack_half_workgroup(const OpTarget& target) { return std::min(256u, target.max_workgroup_invocations); }

Kernel pack_half(const OpTarget& target) {
  KernelBuilder k("pack_half", {pack_half_workgroup(target), 1, 1});
  auto x = k.buffer<vec4>("x", Access::Read);
  auto y = k.buffer<uvec2>("y", Access::Write);
  auto count = k.push<u32>("count");
  auto i = k.global_id().x();
  if_(i < count, [&] {
    auto v = let("v", Expr<vec4>(x[i]));
    y[i] = make_vec<u32>(pack_half2x16(make_vec<f32>(v.x(), v.y())), pack_half2x16(make_vec<f32>(v.z(), v.w())));
  });
  return k.build();
}

Plan plan_pack_half(const OpTarget& target) {
  const uint32_t wg = pack_half_workgroup(target);
  return {pack_half(target), [wg](uint32_t vec4s) { return rt::Grid{ceil_div(vec4s, wg)}; }};
}

}  // namespace bdsl::ops
