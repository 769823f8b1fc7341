// What an op needs to know about the device it is built for. Ops choose workgroup shapes and
// variants from this, never from constants written for one GPU.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device_info.h"

namespace bdsl::ops {

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

  // The device's 16x8x32 int8 matrices hold their elements as PTX's mma.m16n8k32 fragments: found
  // by running a probe (ops/common/matrix_fragments.h's int8_fragments_are_ptx), never assumed.
  bool int8_ptx_fragments = false;

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
