// The small kernels the runtime tests run, written with the DSL (one deliberately broken GLSL
// text for the compiler's error path).
#pragma once
#include <string>

#include "codegen/glsl_printer.h"
#include "codegen/interface_of.h"
#include "codegen/kernel_interface.h"
#include "dsl/dsl.h"

namespace bdsl::test_kernels {

struct TestKernel {
  KernelInterface iface;
  std::string glsl;
};

inline constexpr Type kU32{ScalarKind::U32, 1};
inline constexpr Type kI32{ScalarKind::I32, 1};
inline constexpr Type kF32{ScalarKind::F32, 1};

// The interface and text the DSL gives a kernel: what the runtime tests feed the runtime.
inline TestKernel from_dsl(const dsl::Kernel& k) { return {codegen::interface_of(k), codegen::print_glsl(k)}; }

// data[i] += 1 for i < n: in place, so replaying it k times adds k.
inline TestKernel add_one() {
  using namespace dsl;
  KernelBuilder k("add_one", {64, 1, 1});
  auto data = k.buffer<u32>("data", Access::ReadWrite);
  auto n = k.push<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] { data[i] += 1u; });
  return from_dsl(k.build());
}

// dst[i] = src[i] * factor for i < n.
inline TestKernel scale() {
  using namespace dsl;
  KernelBuilder k("scale", {64, 1, 1});
  auto src = k.buffer<f32>("src", Access::Read);
  auto dst = k.buffer<f32>("dst", Access::Write);
  auto n = k.push<u32>("n");
  auto factor = k.push<f32>("factor");
  auto i = k.global_id().x();
  if_(i < n, [&] { dst[i] = src[i] * factor; });
  return from_dsl(k.build());
}

// out[i] = packed signed 4x8-bit dot product of a[i] and b[i], through OpSDotKHR.
inline TestKernel sdot4x8() {
  using namespace dsl;
  KernelBuilder k("sdot4x8", {64, 1, 1});
  auto a = k.buffer<u32>("a", Access::Read);
  auto b = k.buffer<u32>("b", Access::Read);
  auto out = k.buffer<i32>("out", Access::Write);
  auto n = k.push<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] { out[i] = dsl::sdot4x8(a[i], b[i]); });
  return from_dsl(k.build());
}

// A kernel with a type error on line 6, for the compile error message: hand-written GLSL, since
// the DSL cannot print a type error.
inline TestKernel broken() {
  return {{.name = "broken_kernel",
           .bindings = {{0, "data", Access::ReadWrite, kU32}},
           .workgroup_size = {64, 1, 1}},
          R"(#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Data { uint data[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  data[i] = undeclared_value + 1u;
}
)"};
}

}  // namespace bdsl::test_kernels
