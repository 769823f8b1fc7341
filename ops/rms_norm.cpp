#include "ops/rms_norm.h"

#include <algorithm>
#include <string>

#include "dsl/dsl.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

uint32_t rms_norm_workgroup(const OpTarget& target) {
  // 256 invocations (10 elements each at dim 2560), a whole number of subgroups.
  const uint32_t wg = std::min(256u, target.max_workgroup_invocations);
  return std::max(target.subgroup_size, wg / target.subgroup_size * target.subgroup_size);
}

dsl::Kernel rms_norm(const OpTarget& target, uint32_t dim) {
  const uint32_t wg = rms_norm_workgroup(target);
  KernelBuilder k("rms_norm_f32_" + std::to_string(dim), {wg, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto weight = k.buffer<f32>("weight", Access::Read);
  auto out = k.buffer<f32>("out", Access::Write);
  auto eps = k.push<f32>("eps");
  auto partial = k.shared<f32>("partial", wg / target.subgroup_size);
  auto lid = k.local_index();
  auto base = let("base", k.workgroup_id().x() * dim);

  auto sum_sq = k.var<f32>("sum_sq", 0.0f);
  for_range(lid, constant<u32>(dim), wg, [&](Expr<u32> i) {
    auto v = x[base + i];
    sum_sq += v * v;
  }, "i");
  auto subgroup_sum = let("subgroup_sum", subgroup_add(sum_sq));  // every lane, before the branch
  if_(subgroup_elect(), [&] { partial[k.subgroup_id()] = subgroup_sum; });
  barrier();
  auto total = k.var<f32>("total", 0.0f);
  for_range(constant<u32>(0), k.num_subgroups(), [&](Expr<u32> s) { total += partial[s]; }, "s");
  auto inv = let("inv", 1.0f / sqrt(total / static_cast<float>(dim) + eps));
  for_range(lid, constant<u32>(dim), wg, [&](Expr<u32> i) { out[base + i] = x[base + i] * inv * weight[i]; }, "i");
  return k.build();
}

}  // namespace bdsl::ops
