#include "runtime/device_info.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <set>
#include <sstream>

namespace bdsl::rt {
namespace {

std::set<std::string> device_extensions(VkPhysicalDevice device) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> props(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, props.data());
  std::set<std::string> names;
  for (const auto& p : props) names.insert(p.extensionName);
  return names;
}

DeviceType type_of(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return DeviceType::Discrete;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return DeviceType::Integrated;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return DeviceType::Virtual;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return DeviceType::Cpu;
    default: return DeviceType::Other;
  }
}

void read_core_properties(DeviceInfo& info, const VkPhysicalDeviceProperties& p) {
  info.name = p.deviceName;
  info.type = type_of(p.deviceType);
  info.vendor_id = p.vendorID;
  info.device_id = p.deviceID;
  info.driver_version = p.driverVersion;
  info.api_version = p.apiVersion;
  std::copy(std::begin(p.pipelineCacheUUID), std::end(p.pipelineCacheUUID),
            info.pipeline_cache_uuid.begin());
  const VkPhysicalDeviceLimits& l = p.limits;
  info.max_shared_memory = l.maxComputeSharedMemorySize;
  info.max_storage_buffer_range = l.maxStorageBufferRange;
  info.min_storage_buffer_offset_alignment = l.minStorageBufferOffsetAlignment;
  info.max_push_constants = l.maxPushConstantsSize;
  std::copy(l.maxComputeWorkGroupSize, l.maxComputeWorkGroupSize + 3,
            info.max_workgroup_size.begin());
  info.max_workgroup_invocations = l.maxComputeWorkGroupInvocations;
  std::copy(l.maxComputeWorkGroupCount, l.maxComputeWorkGroupCount + 3,
            info.max_workgroup_count.begin());
  info.timestamp_period_ns = l.timestampPeriod;
}

// Vulkan 1.1/1.2/1.3 property structs, and the extension twins on a 1.2 device.
void read_chained_properties(DeviceInfo& info, VkPhysicalDevice device,
                             const std::set<std::string>& exts) {
  VkPhysicalDeviceVulkan11Properties p11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceVulkan12Properties p12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceSubgroupSizeControlProperties ssc{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
  VkPhysicalDeviceShaderIntegerDotProductProperties dot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &p11};
  p11.pNext = &p12;
  p12.pNext = &m3;
  void** tail = &m3.pNext;
  if (exts.count(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME)) {
    *tail = &host;
    tail = &host.pNext;
  }
  const bool v13 = info.api_at_least(3);
  if (v13 || exts.count(VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) {
    *tail = &ssc;
    tail = &ssc.pNext;
  }
  if (v13 || exts.count(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) *tail = &dot;
  vkGetPhysicalDeviceProperties2(device, &props);
  info.subgroup_size = p11.subgroupSize;
  info.subgroup_operations = (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT)
                                 ? p11.subgroupSupportedOperations : 0;
  info.min_subgroup_size = ssc.minSubgroupSize ? ssc.minSubgroupSize : p11.subgroupSize;
  info.max_subgroup_size = ssc.maxSubgroupSize ? ssc.maxSubgroupSize : p11.subgroupSize;
  info.driver_name = p12.driverName;
  info.driver_info = p12.driverInfo;
  info.max_memory_allocation = m3.maxMemoryAllocationSize;
  info.int_dot_4x8_signed_accelerated = dot.integerDotProduct4x8BitPackedSignedAccelerated;
  info.host_import_alignment = host.minImportedHostPointerAlignment;
}

void read_features(DeviceInfo& info, VkPhysicalDevice device, const std::set<std::string>& exts) {
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  f11.pNext = &f12;
  if (exts.count(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME)) atomic_float.pNext = std::exchange(f11.pNext, &atomic_float);
  if (exts.count(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME)) exec.pNext = std::exchange(f11.pNext, &exec);
  info.int_dot_product_extension =
      !info.api_at_least(3) && exts.count(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
  if (info.api_at_least(3)) f12.pNext = &f13;
  else if (info.int_dot_product_extension) f12.pNext = &dot;
  if (exts.count(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) coop.pNext = std::exchange(f11.pNext, &coop);
  vkGetPhysicalDeviceFeatures2(device, &features);
  // glslang compiles GL_NV_cooperative_matrix kernels to the Vulkan memory model; with device
  // scope too, so the other kernels' device-scope barriers stay valid once it is enabled.
  info.vulkan_memory_model = f12.vulkanMemoryModel && f12.vulkanMemoryModelDeviceScope;
  info.cooperative_matrix_nv = coop.cooperativeMatrix && info.vulkan_memory_model;
  info.int16 = features.features.shaderInt16;
  info.int64 = features.features.shaderInt64;
  info.float64 = features.features.shaderFloat64;
  info.float_atomic_add_buffer = atomic_float.shaderBufferFloat32AtomicAdd;
  info.float_atomic_add_shared = atomic_float.shaderSharedFloat32AtomicAdd;
  info.storage16 = f11.storageBuffer16BitAccess;
  info.float16 = f12.shaderFloat16;
  info.int8 = f12.shaderInt8;
  info.storage8 = f12.storageBuffer8BitAccess;
  info.int_dot_product = f13.shaderIntegerDotProduct || dot.shaderIntegerDotProduct;
  info.subgroup_size_control = f13.subgroupSizeControl;
  info.compute_full_subgroups = f13.computeFullSubgroups;
  info.pipeline_statistics = exec.pipelineExecutableInfo;
}

void read_queue_and_memory(DeviceInfo& info, VkPhysicalDevice device) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  for (uint32_t i = 0; i < count; ++i) {
    if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    info.compute_queue_family = i;
    info.timestamp_valid_bits = families[i].timestampValidBits;
    info.timestamps = families[i].timestampValidBits > 0 && info.timestamp_period_ns > 0;
    break;
  }
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i)
    if (memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes = std::max<uint64_t>(info.device_local_bytes,
                                                   memory.memoryHeaps[i].size);
}

std::optional<ScalarKind> kind_of(VkComponentTypeNV t) {
  switch (t) {
    case VK_COMPONENT_TYPE_SINT8_NV: return ScalarKind::I8;
    case VK_COMPONENT_TYPE_SINT32_NV: return ScalarKind::I32;
    case VK_COMPONENT_TYPE_FLOAT16_NV: return ScalarKind::F16;
    case VK_COMPONENT_TYPE_FLOAT32_NV: return ScalarKind::F32;
    default: return std::nullopt;
  }
}

std::vector<MatrixShape> cooperative_matrix_nv_shapes(VkInstance instance, VkPhysicalDevice device) {
  auto get = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (!get) return {};
  uint32_t count = 0;
  if (get(device, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<VkCooperativeMatrixPropertiesNV> props(count, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  if (get(device, &count, props.data()) != VK_SUCCESS) return {};
  std::vector<MatrixShape> shapes;
  for (const auto& p : props) {
    const auto ab = kind_of(p.AType), c = kind_of(p.CType);
    if (p.scope != VK_SCOPE_SUBGROUP_NV || p.AType != p.BType || p.CType != p.DType || !ab || !c) continue;
    shapes.push_back(MatrixShape{p.MSize, p.NSize, p.KSize, *ab, *c});
  }
  return shapes;
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

std::string subgroup_ops_string(VkSubgroupFeatureFlags ops) {
  static const std::pair<VkSubgroupFeatureFlagBits, const char*> names[] = {
      {VK_SUBGROUP_FEATURE_BASIC_BIT, "basic"},       {VK_SUBGROUP_FEATURE_VOTE_BIT, "vote"},
      {VK_SUBGROUP_FEATURE_ARITHMETIC_BIT, "arithmetic"}, {VK_SUBGROUP_FEATURE_BALLOT_BIT, "ballot"},
      {VK_SUBGROUP_FEATURE_SHUFFLE_BIT, "shuffle"},
      {VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT, "shuffle_relative"},
      {VK_SUBGROUP_FEATURE_CLUSTERED_BIT, "clustered"}, {VK_SUBGROUP_FEATURE_QUAD_BIT, "quad"}};
  std::string out;
  for (const auto& [bit, name] : names)
    if (ops & bit) out += (out.empty() ? "" : ",") + std::string(name);
  return out.empty() ? "none" : out;
}

}  // namespace

const char* to_string(DeviceType type) {
  switch (type) {
    case DeviceType::Discrete: return "discrete";
    case DeviceType::Integrated: return "integrated";
    case DeviceType::Virtual: return "virtual";
    case DeviceType::Cpu: return "cpu";
    case DeviceType::Other: return "other";
  }
  return "?";
}

std::string api_version_string(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

DeviceInfo query_device_info(VkPhysicalDevice device, uint32_t index, VkInstance instance) {
  DeviceInfo info;
  info.index = index;
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(device, &props);
  read_core_properties(info, props);
  read_queue_and_memory(info, device);
  if (!info.api_at_least(2)) return info;  // too old to use; listed so the user sees it
  const auto exts = device_extensions(device);
  read_chained_properties(info, device, exts);
  read_features(info, device, exts);
  info.cooperative_matrix_khr = exts.count("VK_KHR_cooperative_matrix") > 0;
  if (info.cooperative_matrix_nv && instance) info.cooperative_matrix_nv_shapes = cooperative_matrix_nv_shapes(instance, device);
  return info;
}

std::vector<std::string> DeviceInfo::missing(const KernelFeatures& f) const {
  std::vector<std::string> out;
  auto need = [&](bool wanted, bool have, const char* feature) {
    if (wanted && !have) out.emplace_back(feature);
  };
  need(f.int_dot_product, int_dot_product, "int_dot_product (shaderIntegerDotProduct)");
  need(f.subgroup_basic, subgroup_operations & VK_SUBGROUP_FEATURE_BASIC_BIT, "subgroup_basic");
  need(f.subgroup_arithmetic, subgroup_operations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT,
       "subgroup_arithmetic");
  need(f.subgroup_shuffle, subgroup_operations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT,
       "subgroup_shuffle");
  need(f.subgroup_shuffle_relative, subgroup_operations & VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT,
       "subgroup_shuffle_relative");
  need(f.subgroup_ballot, subgroup_operations & VK_SUBGROUP_FEATURE_BALLOT_BIT, "subgroup_ballot");
  need(f.float16, float16, "float16 (shaderFloat16)");
  need(f.storage16, storage16, "storage16 (storageBuffer16BitAccess)");
  need(f.int8, int8, "int8 (shaderInt8)");
  need(f.int64, int64, "int64 (shaderInt64)");
  need(f.float64, float64, "float64 (shaderFloat64)");
  need(f.float_atomic_add_buffer, float_atomic_add_buffer, "float_atomic_add_buffer (shaderBufferFloat32AtomicAdd)");
  need(f.float_atomic_add_shared, float_atomic_add_shared, "float_atomic_add_shared (shaderSharedFloat32AtomicAdd)");
  need(f.storage8, storage8, "storage8 (storageBuffer8BitAccess)");
  need(f.cooperative_matrix_nv, cooperative_matrix_nv, "cooperative_matrix_nv (VK_NV_cooperative_matrix)");
  need(f.memory_model, vulkan_memory_model, "memory_model (vulkanMemoryModel, vulkanMemoryModelDeviceScope)");
  for (const MatrixShape& m : f.matrix_shapes)
    if (cooperative_matrix_nv && std::find(cooperative_matrix_nv_shapes.begin(), cooperative_matrix_nv_shapes.end(), m) ==
                                     cooperative_matrix_nv_shapes.end())
      out.push_back("cooperative matrix shape " + to_string(m));
  return out;  // atomics on 32-bit storage buffer words are core Vulkan
}

std::string DeviceInfo::summary() const {
  return "#" + std::to_string(index) + " " + name + " (" + to_string(type) + ", " + driver_name +
         " " + driver_info + ", Vulkan " + api_version_string(api_version) + ")";
}

std::string DeviceInfo::describe() const {
  std::ostringstream o;
  o << summary() << "\n"
    << "  ids: vendor 0x" << std::hex << vendor_id << ", device 0x" << device_id
    << ", driver version 0x" << driver_version << std::dec << "\n"
    << "  subgroup: size " << subgroup_size << " (" << min_subgroup_size << ".."
    << max_subgroup_size << "), operations " << subgroup_ops_string(subgroup_operations)
    << ", size control " << yes_no(subgroup_size_control) << "\n"
    << "  workgroup: max size " << max_workgroup_size[0] << "x" << max_workgroup_size[1] << "x"
    << max_workgroup_size[2] << ", max invocations " << max_workgroup_invocations
    << ", shared memory " << max_shared_memory << " B\n"
    << "  memory: device-local heap " << (device_local_bytes >> 20) << " MiB, max allocation "
    << (max_memory_allocation >> 20) << " MiB, max storage buffer range "
    << (max_storage_buffer_range >> 20) << " MiB, push constants " << max_push_constants
    << " B, host memory read in place "
    << (host_import_alignment ? "yes (alignment " + std::to_string(host_import_alignment) + " B)" : std::string("no"))
    << "\n"
    << "  features: int dot product " << yes_no(int_dot_product) << " (4x8 signed accelerated "
    << yes_no(int_dot_4x8_signed_accelerated) << "), float16 " << yes_no(float16) << ", int8 "
    << yes_no(int8) << ", int16 " << yes_no(int16) << ", int64 " << yes_no(int64) << ", float64 " << yes_no(float64) << ", 16-bit storage " << yes_no(storage16)
    << ", 8-bit storage " << yes_no(storage8) << ", Vulkan memory model " << yes_no(vulkan_memory_model) << "\n"
    << "  cooperative matrix: KHR " << yes_no(cooperative_matrix_khr) << ", NV "
    << yes_no(cooperative_matrix_nv);
  for (size_t i = 0; i < cooperative_matrix_nv_shapes.size(); ++i)
    o << (i ? ", " : " (") << to_string(cooperative_matrix_nv_shapes[i]) << (i + 1 == cooperative_matrix_nv_shapes.size() ? ")" : "");
  o << "\n"
    << "  timestamps: " << yes_no(timestamps) << " (period " << timestamp_period_ns << " ns, "
    << timestamp_valid_bits << " valid bits)\n";
  return o.str();
}

}  // namespace bdsl::rt
