// The small kernels the runtime tests run, as GLSL with hand-written interfaces. They stand in
// for DSL kernels until the DSL prints them; replace each with its DSL twin then.
#pragma once
#include <string>

#include "codegen/kernel_interface.h"

namespace bdsl::test_kernels {

struct TestKernel {
  KernelInterface iface;
  std::string glsl;
};

inline constexpr Type kU32{ScalarKind::U32, 1};
inline constexpr Type kI32{ScalarKind::I32, 1};
inline constexpr Type kF32{ScalarKind::F32, 1};

// data[i] += 1 for i < n: in place, so replaying it k times adds k.
inline TestKernel add_one() {
  return {{.name = "add_one",
           .bindings = {{0, "data", Access::ReadWrite, kU32}},
           .push_fields = {{"n", kU32, 0}},
           .push_bytes = 4,
           .workgroup_size = {64, 1, 1}},
          R"(#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) buffer Data { uint data[]; };
layout(push_constant) uniform Push { uint n; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.n) data[i] += 1u;
}
)"};
}

// dst[i] = src[i] * scale for i < n.
inline TestKernel scale() {
  return {{.name = "scale",
           .bindings = {{0, "src", Access::Read, kF32}, {1, "dst", Access::Write, kF32}},
           .push_fields = {{"n", kU32, 0}, {"factor", kF32, 4}},
           .push_bytes = 8,
           .workgroup_size = {64, 1, 1}},
          R"(#version 450
layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Src { float src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { float dst[]; };
layout(push_constant) uniform Push { uint n; float factor; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.n) dst[i] = src[i] * pc.factor;
}
)"};
}

// out[i] = packed signed 4x8-bit dot product of a[i] and b[i], through OpSDotKHR.
inline TestKernel sdot4x8() {
  return {{.name = "sdot4x8",
           .bindings = {{0, "a", Access::Read, kU32},
                        {1, "b", Access::Read, kU32},
                        {2, "out", Access::Write, kI32}},
           .push_fields = {{"n", kU32, 0}},
           .push_bytes = 4,
           .workgroup_size = {64, 1, 1},
           .features = {.int_dot_product = true}},
          R"(#version 450
#extension GL_EXT_spirv_intrinsics : require
layout(local_size_x = 64) in;
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int fmt);
layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { int result[]; };
layout(push_constant) uniform Push { uint n; } pc;
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.n) result[i] = sdot4x8(a[i], b[i], 0);
}
)"};
}

// A kernel with a type error on line 6, for the compile error message.
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
