#include "ops/examples/saxpy.h"

#include "dsl/dsl.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

dsl::Kernel saxpy() {
  KernelBuilder k("saxpy", {256, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto n = k.push<u32>("n");
  auto a = k.push<f32>("a");
  auto i = k.global_id().x();
  if_(i < n, [&] { y[i] = a * x[i] + y[i]; });
  return k.build();
}

}  // namespace bdsl::ops
