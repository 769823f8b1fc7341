// What an op needs to know about the device it is built for. Ops choose workgroup shapes and
// variants from this, never from constants written for one GPU.
#pragma once
#include <cstdint>

#include "runtime/device_info.h"

namespace bdsl::ops {

struct OpTarget {
  uint32_t subgroup_size = 32;
  uint32_t max_workgroup_invocations = 256;
  uint32_t max_shared_bytes = 16384;
  uint64_t max_storage_buffer_range = 1ull << 27;
  bool int_dot_product = false;  // sdot4x8 (OpSDotKHR) is available

  static OpTarget from(const rt::DeviceInfo& device) {
    OpTarget t;
    t.subgroup_size = device.subgroup_size;
    t.max_workgroup_invocations = device.max_workgroup_invocations;
    t.max_shared_bytes = device.max_shared_memory;
    t.max_storage_buffer_range = device.max_storage_buffer_range;
    t.int_dot_product = device.int_dot_product;
    return t;
  }
};

}  // namespace bdsl::ops
