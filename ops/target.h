// What an op needs to know about the device it is built for. Ops choose workgroup shapes and
// variants from this, never from constants written for one GPU.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/device_info.h"

namespace bdsl::ops {

// Element i of an invocation's share of an A (16 x 32), B (32 x 8) or C (16 x 8) is PTX's fragment
// element a[i] (b[i], c[i]) of that invocation (ops/common/matrix_fragments.h names PTX's).
struct Int8FragmentOrder {
  std::array<uint8_t, 16> a{};
  std::array<uint8_t, 8> b{};
  std::array<uint8_t, 4> c{};
  bool operator==(const Int8FragmentOrder&) const = default;
  // PTX's own order: element i is PTX's element i.
  static Int8FragmentOrder ptx() {
    Int8FragmentOrder o;
    for (uint8_t i = 0; i < 16; ++i) o.a[i] = i;
    for (uint8_t i = 0; i < 8; ++i) o.b[i] = i;
    for (uint8_t i = 0; i < 4; ++i) o.c[i] = i;
    return o;
  }
};

struct OpTarget {
  std::string device_name;  // for the tuning table (ops/tuning.h) only: it never changes a result
  uint32_t subgroup_size = 32;
  uint32_t max_workgroup_invocations = 256;
  uint32_t max_shared_bytes = 16384;
  uint64_t max_storage_buffer_range = 1ull << 27;
  bool int_dot_product = false;  // sdot4x8 (OpSDotKHR) is available
  // The device runs every compute workgroup with subgroup_size lanes (its range is that one size):
  // code for other subgroup sizes is left out.
  bool subgroup_size_fixed = false;
  // Cooperative-matrix (tensor core) multiply-add shapes the device runs (VK_NV_cooperative_matrix);
  // empty: none, the plain variants run.
  std::vector<MatrixShape> matrix_shapes;
  // Driver workaround (docs/driver-notes.md): packed dot products keep one accumulator per code
  // field only where a lane's chunks are written out, never across a loop over chunks. NVIDIA
  // 580 miscompiles the prefill matmul's QKV with four accumulators per token in that loop (a
  // lane's loop sums lost; right with spirv-opt off too, and under GPU-assisted validation).
  // Only tests set it, to keep checking whether a driver still gets it wrong.
  bool field_accumulators_in_loops = false;
  // The Vulkan memory model (vulkanMemoryModel with device scope): workgroups of a dispatch hand
  // results over through it (ops/common/handoff.h).
  bool memory_model = false;
  bool float64 = false;  // shaderFloat64
  // RMSNorm's scale at bitnet.cpp's rounding points (ops/common/norm_scale.h; needs float64): asked
  // for by the model (ModelOptions::exact_norm_scale), never set from the device alone.
  bool exact_norm_scale = false;

  // Where the device's 16x8x32 int8 matrices hold PTX's mma.m16n8k32 fragments, in what order:
  // found by running a probe (ops/common/matrix_fragments.h), never assumed; none where the
  // elements are not PTX's fragments in some order the same for every invocation.
  std::optional<Int8FragmentOrder> int8_fragments;

  bool has_matrix_shape(const MatrixShape& m) const {
    return std::find(matrix_shapes.begin(), matrix_shapes.end(), m) != matrix_shapes.end();
  }

  static OpTarget from(const rt::DeviceInfo& device) {
    OpTarget t;
    t.device_name = device.name;
    t.subgroup_size = device.subgroup_size;
    t.max_workgroup_invocations = device.max_workgroup_invocations;
    t.max_shared_bytes = device.max_shared_memory;
    t.max_storage_buffer_range = device.max_storage_buffer_range;
    t.int_dot_product = device.int_dot_product;
    t.subgroup_size_fixed = device.subgroup_size > 0 && device.min_subgroup_size == device.subgroup_size &&
                            device.max_subgroup_size == device.subgroup_size;
    if (device.cooperative_matrix_nv) t.matrix_shapes = device.cooperative_matrix_nv_shapes;
    t.memory_model = device.vulkan_memory_model;
    t.float64 = device.float64;
    return t;
  }
};

}  // namespace bdsl::ops
