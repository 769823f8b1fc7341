// What one Vulkan physical device is and can do, gathered once from the properties and feature
// chains; the runtime checks kernels against it and `describe()` prints it.
#pragma once
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_interface.h"

namespace bdsl::rt {

enum class DeviceType : uint8_t { Discrete, Integrated, Virtual, Cpu, Other };
const char* to_string(DeviceType type);

struct DeviceInfo {
  // Identity
  uint32_t index = 0;  // position in vkEnumeratePhysicalDevices
  std::string name;
  DeviceType type = DeviceType::Other;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  std::string driver_name;  // "llvmpipe", "NVIDIA", ...
  std::string driver_info;  // "Mesa 22.3.6", "580.65", ...
  uint32_t driver_version = 0;
  uint32_t api_version = 0;  // VK_MAKE_API_VERSION of the device
  std::array<uint8_t, VK_UUID_SIZE> pipeline_cache_uuid{};
  uint32_t compute_queue_family = 0;

  // Limits
  uint32_t subgroup_size = 0;
  uint32_t min_subgroup_size = 0;
  uint32_t max_subgroup_size = 0;
  uint32_t max_shared_memory = 0;
  uint64_t max_storage_buffer_range = 0;
  uint64_t min_storage_buffer_offset_alignment = 1;
  uint64_t max_memory_allocation = 0;
  uint32_t max_push_constants = 0;
  std::array<uint32_t, 3> max_workgroup_size{};
  uint32_t max_workgroup_invocations = 0;
  std::array<uint32_t, 3> max_workgroup_count{};
  float timestamp_period_ns = 0.0f;
  bool timestamps = false;          // the compute queue family supports timestamps
  uint32_t timestamp_valid_bits = 0;
  uint64_t device_local_bytes = 0;  // size of the largest device-local heap
  // VK_EXT_external_memory_host: host memory the device can read in place (Buffer::over_host),
  // imported at this alignment (minImportedHostPointerAlignment); 0 where the extension is absent.
  uint64_t host_import_alignment = 0;

  // Features
  bool int_dot_product = false;                 // shaderIntegerDotProduct
  bool int_dot_product_extension = false;       // via VK_KHR_shader_integer_dot_product (1.2)
  bool int_dot_4x8_signed_accelerated = false;  // packed int8 dot is a hardware instruction
  bool float16 = false;
  bool int8 = false;
  bool int16 = false;
  bool int64 = false;                    // shaderInt64
  bool float64 = false;                  // shaderFloat64
  bool float_atomic_add_buffer = false;  // VK_EXT_shader_atomic_float: shaderBufferFloat32AtomicAdd
  bool float_atomic_add_shared = false;  // ... shaderSharedFloat32AtomicAdd
  bool storage16 = false;
  bool storage8 = false;
  VkSubgroupFeatureFlags subgroup_operations = 0;
  bool subgroup_size_control = false;
  bool compute_full_subgroups = false;
  bool cooperative_matrix_khr = false;  // the extension is listed (not used yet)
  bool cooperative_matrix_nv = false;   // VK_NV_cooperative_matrix: cooperativeMatrix and the memory model
  // Its subgroup-scope shapes whose A and B share a type and C and the result share one, as
  // vkGetPhysicalDeviceCooperativeMatrixPropertiesNV lists them (types the DSL has: i8, i32, f16, f32).
  std::vector<MatrixShape> cooperative_matrix_nv_shapes;
  bool vulkan_memory_model = false;  // vulkanMemoryModel and vulkanMemoryModelDeviceScope
  bool pipeline_statistics = false;  // VK_KHR_pipeline_executable_properties: registers etc. per kernel

  bool api_at_least(uint32_t minor) const { return VK_API_VERSION_MINOR(api_version) >= minor; }
  // The features of `needed` this device lacks, by name ("int_dot_product", ...); empty if none.
  std::vector<std::string> missing(const KernelFeatures& needed) const;
  std::string describe() const;  // several lines, one topic each
  std::string summary() const;   // one line: "#0 llvmpipe (cpu, Mesa 22.3.6, Vulkan 1.3.230)"
};

// Queries everything above; `index` is the device's position in the enumeration.
// The instance is needed for the cooperative-matrix shapes (an extension entry point).
DeviceInfo query_device_info(VkPhysicalDevice device, uint32_t index, VkInstance instance = VK_NULL_HANDLE);

std::string api_version_string(uint32_t version);

}  // namespace bdsl::rt
