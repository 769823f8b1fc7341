// What a compiled kernel asks of whoever dispatches it: its bindings, push constants, workgroup
// size and device features. The runtime checks every dispatch against this.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dsl/type.h"

namespace bdsl {

enum class Access : uint8_t { Read, Write, ReadWrite };
inline bool reads(Access a) { return a != Access::Write; }
inline bool writes(Access a) { return a != Access::Read; }
const char* to_string(Access a);

struct BindingInfo {
  uint32_t binding = 0;  // set 0, binding N
  std::string name;
  Access access = Access::Read;
  Type element;          // element type of the runtime array
};

struct PushField {
  std::string name;
  Type type;
  uint32_t offset = 0;
};

// A cooperative-matrix multiply-add a kernel does: (M x K) * (K x N) + (M x N), A and B of type
// `ab`, accumulator of type `c`. The device must list it.
struct MatrixShape {
  uint32_t m = 0, n = 0, k = 0;
  ScalarKind ab = ScalarKind::I8, c = ScalarKind::I32;
  friend bool operator==(const MatrixShape&, const MatrixShape&) = default;
};
std::string to_string(const MatrixShape& s);  // "16x8x32 i8*i8+i32"

// Device capabilities a kernel uses; the runtime refuses a pipeline the device cannot run.
struct KernelFeatures {
  bool int_dot_product = false;    // OpSDotKHR (VK_KHR_shader_integer_dot_product / Vulkan 1.3)
  bool subgroup_basic = false;
  bool subgroup_arithmetic = false;
  bool subgroup_shuffle = false;
  bool subgroup_ballot = false;
  bool float16 = false;            // shaderFloat16 arithmetic
  bool storage16 = false;          // 16-bit storage buffer access
  bool atomics = false;
  bool int8 = false;               // int8_t values (shaderInt8)
  bool storage8 = false;           // 8-bit storage buffer access
  bool cooperative_matrix_nv = false;       // VK_NV_cooperative_matrix
  std::vector<MatrixShape> matrix_shapes;   // each multiply-add shape, once
  friend bool operator==(const KernelFeatures&, const KernelFeatures&) = default;
};

struct KernelInterface {
  std::string name;
  std::vector<BindingInfo> bindings;
  std::vector<PushField> push_fields;
  uint32_t push_bytes = 0;
  std::array<uint32_t, 3> workgroup_size{1, 1, 1};
  uint32_t shared_bytes = 0;
  KernelFeatures features;
};

// The result of codegen: everything the runtime needs to build a pipeline.
struct CompiledKernel {
  KernelInterface iface;
  std::string glsl;              // the printed source, for humans and for the cache key
  std::string key;               // hex SHA-256 of everything that changes the binary
  std::vector<uint32_t> spirv;
  // Specialization constants (constant_id -> 32-bit value) the pipeline is built with.
  std::vector<std::pair<uint32_t, uint32_t>> spec_constants;
};

}  // namespace bdsl
