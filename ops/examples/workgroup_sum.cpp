#include "ops/examples/workgroup_sum.h"

#include "dsl/dsl.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

dsl::Kernel workgroup_sum(uint32_t workgroup) {
  if (workgroup == 0 || (workgroup & (workgroup - 1)) != 0)
    throw DslError("workgroup_sum: workgroup size " + std::to_string(workgroup) + " is not a power of two");
  KernelBuilder k("workgroup_sum_" + std::to_string(workgroup), {workgroup, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto sums = k.buffer<f32>("sums", Access::Write);
  auto n = k.push<u32>("n");
  auto partial = k.shared<f32>("partial", workgroup);
  auto lid = k.local_index();
  auto i = k.global_id().x();

  partial[lid] = 0.0f;
  if_(i < n, [&] { partial[lid] = x[i]; });  // not select(): that may read x[i] past the end
  barrier();
  // The halving steps are unrolled by C++: each one is a plain `if` followed by a barrier that
  // every invocation reaches.
  for (uint32_t stride = workgroup / 2; stride > 0; stride /= 2) {
    if_(lid < stride, [&] { partial[lid] = partial[lid] + partial[lid + stride]; });
    barrier();
  }
  if_(lid == 0u, [&] { sums[k.workgroup_id().x()] = partial[0u]; });
  return k.build();
}

}  // namespace bdsl::ops
