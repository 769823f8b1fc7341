#include "ops/examples/subgroup_softmax.h"

#include "dsl/dsl.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

dsl::Kernel subgroup_softmax(uint32_t workgroup) {
  KernelBuilder k("subgroup_softmax", {workgroup, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto y = k.buffer<f32>("y", Access::Write);
  auto rows = k.push<u32>("rows");
  auto cols = k.push<u32>("cols");
  auto row = k.workgroup_id().x() * k.num_subgroups() + k.subgroup_id();
  auto lane = k.subgroup_invocation();
  auto width = k.subgroup_size();

  if_(row < rows, [&] {  // the same for the whole subgroup, so its reductions see every lane
    auto base = row * cols;
    auto m = k.var<f32>("m", -3.402823466e38f);
    for_range(lane, cols, width, [&](Expr<u32> c) { m = max(m, x[base + c]); }, "c");
    auto row_max = let("row_max", subgroup_max(m));
    auto s = k.var<f32>("s", 0.0f);
    for_range(lane, cols, width, [&](Expr<u32> c) { s += exp(x[base + c] - row_max); }, "c");
    auto inv_sum = let("inv_sum", 1.0f / subgroup_add(s));
    for_range(lane, cols, width, [&](Expr<u32> c) { y[base + c] = exp(x[base + c] - row_max) * inv_sum; }, "c");
  });
  return k.build();
}

}  // namespace bdsl::ops
