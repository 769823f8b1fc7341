// What a kernel asks of whoever dispatches it: its bindings, push constants, workgroup size and
// device features. The DSL builds it with the kernel; the runtime checks every dispatch against
// it (codegen/kernel_interface.h adds the compiled binary).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
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
  bool parameters = false;  // the graph's parameter words (KernelBuilder::param), bound by the graph
};

struct PushField {
  std::string name;
  Type type;
  uint32_t offset = 0;
  // A parameter (KernelBuilder::param): the field holds the index of a word of the parameters
  // binding, and this is the type of the value there; the graph pushes the index.
  std::optional<Type> parameter;
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
  bool subgroup_shuffle_relative = false;  // shuffle up / down
  bool subgroup_ballot = false;
  bool float16 = false;            // shaderFloat16 arithmetic
  bool storage16 = false;          // 16-bit storage buffer access
  bool atomics = false;
  bool float_atomic_add_buffer = false;  // atomic_add on an f32 buffer element (shaderBufferFloat32AtomicAdd)
  bool float_atomic_add_shared = false;  // ... on an f32 shared element (shaderSharedFloat32AtomicAdd)
  bool int64 = false;              // 64-bit integers (shaderInt64)
  bool float64 = false;            // 64-bit floats (shaderFloat64)
  bool int8 = false;               // int8_t values (shaderInt8)
  bool storage8 = false;           // 8-bit storage buffer access
  bool cooperative_matrix_nv = false;       // VK_NV_cooperative_matrix
  bool memory_model = false;               // Vulkan memory model (handoff buffers, device_barrier, atomic_load)
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

}  // namespace bdsl
