#include "ops/common/rms_norm.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "dsl/dsl.h"
#include "ops/common/matrix_support.h"
#include "ops/common/norm_scale.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

uint32_t rms_norm_workgroup(const OpTarget& target) {
  // 256 invocations (10 elements each at dim 2560), a whole number of subgroups.
  const uint32_t wg = std::min(256u, target.max_workgroup_invocations);
  return std::max(target.subgroup_size, wg / target.subgroup_size * target.subgroup_size);
}

RmsNormSlice emit_rms_norm_slice(KernelBuilder& k, const OpTarget& target, const Buffer<f32>& x, const Buffer<f32>& weight,
                                 Expr<u32> base, Expr<f32> eps, uint32_t dim) {
  const uint32_t wg = rms_norm_workgroup(target);
  auto lid = k.local_index();

  // Each invocation's elements lid, lid + wg, ... written out, not looped: all loads (x and the
  // weight) in flight at once, the values kept for the output. Summed in the same order as a loop,
  // in f32 or, for ggml's scale, in f64 (ops/common/norm_scale.h).
  std::vector<Expr<u32>> at;
  std::vector<std::optional<Expr<boolean>>> in;
  std::vector<Expr<f32>> xs, ws;
  SquareSum sum(norm_scale_mode(target, wg));
  for (uint32_t u = 0; u * wg < dim; ++u) {
    at.push_back(let("i", lid + u * wg));
    const bool may_pass = (u + 1) * wg > dim;
    in.push_back(may_pass ? std::optional<Expr<boolean>>(let("in_range", at.back() < dim)) : std::nullopt);
    auto readable = may_pass ? min(at.back(), constant<u32>(dim - 1)) : at.back();
    xs.push_back(let("xv", Expr<f32>(x[base + readable])));
    ws.push_back(let("wv", Expr<f32>(weight[readable])));
    sum.add(may_pass ? select(*in.back(), xs.back(), constant<f32>(0.0f)) : xs.back());
  }
  return {at, in, xs, ws, rms_inverses(k, wg, dim, {sum}, {eps})[0]};
}

dsl::Kernel rms_norm(const OpTarget& target, uint32_t dim) {
  const uint32_t wg = rms_norm_workgroup(target);
  KernelBuilder k("rms_norm_f32_" + std::to_string(dim), {wg, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto weight = k.buffer<f32>("weight", Access::Read);
  auto out = k.buffer<f32>("out", Access::Write);
  auto eps = k.push<f32>("eps");
  auto base = let("base", k.workgroup_id().x() * dim);
  const RmsNormSlice s = emit_rms_norm_slice(k, target, x, weight, base, eps, dim);
  for (size_t u = 0; u < s.at.size(); ++u) {
    auto store = [&] { out[base + s.at[u]] = s.normalized(u); };
    if (s.in[u])
      if_(*s.in[u], store);
    else
      store();
  }
  return k.build();
}

Plan plan_rms_norm(const OpTarget& target, uint32_t dim) {
  return {rms_norm(target, dim), [](uint32_t rows) { return rt::Grid{rows}; }};
}

}  // namespace bdsl::ops
