#include "runtime/context.h"

#include <dlfcn.h>
#include <link.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <utility>

#include "codegen/shader_cache.h"
#include "runtime/device_choice.h"
#include "runtime/vk_error.h"

namespace bdsl::rt {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

bool validation_layer_present() {
  uint32_t count = 0;
  vkEnumerateInstanceLayerProperties(&count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, kValidationLayer) == 0) return true;
  return false;
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* log = static_cast<ValidationLog*>(user);
  std::string message = data && data->pMessage ? data->pMessage : "(no message)";
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    std::cerr << "[vulkan validation error] " << message << "\n";
    log->add_error(std::move(message));
  } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    std::cerr << "[vulkan validation warning] " << message << "\n";
    log->add_warning(std::move(message));
  }
  return VK_FALSE;
}

VkDebugUtilsMessengerCreateInfoEXT messenger_info(ValidationLog* log) {
  VkDebugUtilsMessengerCreateInfoEXT info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  info.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  info.pfnUserCallback = on_validation_message;
  info.pUserData = log;
  return info;
}

uint32_t instance_api_version() {
  uint32_t version = VK_API_VERSION_1_0;
  vkEnumerateInstanceVersion(&version);
  return version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;
}

VkInstance make_instance(const std::vector<const char*>& layers,
                         const std::vector<const char*>& extensions, const void* next) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "bitnet-dsl";
  app.pEngineName = "bitnet-dsl";
  app.apiVersion = instance_api_version();
  VkInstanceCreateInfo create{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, next};
  create.pApplicationInfo = &app;
  create.enabledLayerCount = static_cast<uint32_t>(layers.size());
  create.ppEnabledLayerNames = layers.data();
  create.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  create.ppEnabledExtensionNames = extensions.data();
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult result = vkCreateInstance(&create, nullptr, &instance);
  if (result == VK_ERROR_INCOMPATIBLE_DRIVER)  // the loader found no driver (ICD) at all
    throw VulkanError("no Vulkan device found: the Vulkan loader found no driver (install one, e.g. Debian's "
                      "mesa-vulkan-drivers for a CPU device; VK_ICD_FILENAMES may point elsewhere): vkCreateInstance",
                      result);
  vk_check(result, "vkCreateInstance");
  return instance;
}

// Mesa's drivers (libvulkan_*.so: lavapipe, ...) stay mapped until the process ends, even after
// the loader closes them. Mesa 22.3.6's lavapipe keeps a 128-byte block reachable only from its own
// globals: unmapped at the last vkDestroyInstance, LeakSanitizer reports it as a leak "in an
// unknown module" at exit (sanitized builds; a bare create/destroy shows it too).
void pin_loaded_drivers() {
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) {
        if (info->dlpi_name && std::strstr(info->dlpi_name, "/libvulkan_"))
          dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);  // a reference never dropped
        return 0;
      },
      nullptr);
}

// The NVIDIA driver cannot be loaded again after ~30 instance create/destroy cycles in one process
// (seen on driver 580: vkCreateInstance then fails with VK_ERROR_INCOMPATIBLE_DRIVER). One bare
// instance held for the whole process keeps the drivers loaded, so later contexts reuse them.
void keep_drivers_loaded() {
  struct KeepAlive {
    VkInstance instance = VK_NULL_HANDLE;
    KeepAlive() {
      try {
        instance = make_instance({}, {}, nullptr);
        pin_loaded_drivers();
      } catch (const VulkanError&) {
        // No driver now: the context's own vkCreateInstance reports it.
      }
    }
    ~KeepAlive() {
      if (instance) vkDestroyInstance(instance, nullptr);
    }
  };
  static KeepAlive keep_alive;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  uint32_t count = 0;
  vk_check(vkEnumeratePhysicalDevices(instance, &count, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> devices(count);
  vk_check(vkEnumeratePhysicalDevices(instance, &count, devices.data()),
           "vkEnumeratePhysicalDevices");
  return devices;
}

std::vector<DeviceInfo> infos_of(VkInstance instance, const std::vector<VkPhysicalDevice>& devices) {
  std::vector<DeviceInfo> infos;
  for (uint32_t i = 0; i < devices.size(); ++i) infos.push_back(query_device_info(devices[i], i, instance));
  return infos;
}

// The features kernels may use, each switched on only where the device has it.
struct EnabledFeatures {
  VkPhysicalDeviceFeatures2 core{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan13Features v13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceShaderIntegerDotProductFeatures dot{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coop{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceShaderAtomicFloatFeaturesEXT atomic_float{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT};
  std::vector<const char*> extensions;

  EnabledFeatures(const DeviceInfo& info, bool statistics) {
    core.pNext = &v11;
    v11.pNext = &v12;
    core.features.shaderInt16 = info.int16;
    core.features.shaderInt64 = info.int64;
    core.features.shaderFloat64 = info.float64;
    if (info.float_atomic_add_buffer || info.float_atomic_add_shared) {  // float atomic_add (dsl/builtins.h)
      atomic_float.shaderBufferFloat32AtomicAdd = info.float_atomic_add_buffer;
      atomic_float.shaderSharedFloat32AtomicAdd = info.float_atomic_add_shared;
      atomic_float.pNext = std::exchange(v11.pNext, &atomic_float);
      extensions.push_back(VK_EXT_SHADER_ATOMIC_FLOAT_EXTENSION_NAME);
    }
    v11.storageBuffer16BitAccess = info.storage16;
    v12.shaderFloat16 = info.float16;
    v12.shaderInt8 = info.int8;
    v12.storageBuffer8BitAccess = info.storage8;
    // Tensor-core kernels and device-scope handoffs (dsl/control.h's device_barrier) compile to
    // Vulkan memory model SPIR-V.
    if (info.vulkan_memory_model) v12.vulkanMemoryModel = v12.vulkanMemoryModelDeviceScope = VK_TRUE;
    if (info.cooperative_matrix_nv) {  // tensor-core kernels (dsl/matrix.h)
      coop.cooperativeMatrix = VK_TRUE;
      coop.pNext = std::exchange(v11.pNext, &coop);
      extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    }
    if (info.host_import_alignment)  // Buffer::over_host
      extensions.push_back(VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
    if (statistics && info.pipeline_statistics) {
      exec.pipelineExecutableInfo = VK_TRUE;
      exec.pNext = std::exchange(v11.pNext, &exec);
      extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    }
    if (info.api_at_least(3)) {
      v12.pNext = &v13;
      v13.shaderIntegerDotProduct = info.int_dot_product;
      v13.subgroupSizeControl = info.subgroup_size_control;
      v13.computeFullSubgroups = info.compute_full_subgroups;
    } else if (info.int_dot_product_extension) {
      v12.pNext = &dot;
      dot.shaderIntegerDotProduct = info.int_dot_product;
      extensions.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    }
  }
};

}  // namespace

std::vector<DeviceInfo> Context::list_devices() {
  keep_drivers_loaded();
  VkInstance instance = make_instance({}, {}, nullptr);
  std::vector<DeviceInfo> infos;
  try {
    infos = infos_of(instance, physical_devices(instance));
  } catch (...) {
    vkDestroyInstance(instance, nullptr);
    throw;
  }
  vkDestroyInstance(instance, nullptr);
  return infos;
}

Context::Context(const ContextOptions& options) {
  bool validation = options.validation.value_or(env_is("BDSL_VALIDATION", "1"));
  if (validation && !validation_layer_present()) {
    static std::once_flag once;
    std::call_once(once, [] {
      std::cerr << "bitnet-dsl: " << kValidationLayer
                << " is not installed; running without Vulkan validation\n";
    });
    validation = false;
  }
  keep_drivers_loaded();
  try {
    create_instance(validation);
    create_device(options);
  } catch (...) {
    release();  // a throwing constructor runs no destructor: free what was made so far
    throw;
  }
}

void Context::create_instance(bool validation) {
  std::vector<const char*> layers, extensions;
  VkDebugUtilsMessengerCreateInfoEXT debug = messenger_info(log_.get());
  if (validation) {
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  // Chained into the instance too, so messages from instance creation and destruction count.
  instance_ = make_instance(layers, extensions, validation ? &debug : nullptr);
  if (!validation) return;
  auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
      vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
  if (!create) throw std::runtime_error("vkCreateDebugUtilsMessengerEXT is not available");
  vk_check(create(instance_, &debug, nullptr, &messenger_), "vkCreateDebugUtilsMessengerEXT");
}

void Context::create_device(const ContextOptions& options) {
  const auto devices = physical_devices(instance_);
  const auto infos = infos_of(instance_, devices);
  const char* env_device = std::getenv("BDSL_DEVICE");
  const std::string wish = !options.device.empty() ? options.device
                                                   : (env_device ? env_device : "");
  const size_t chosen = choose_device(infos, wish);
  physical_ = devices[chosen];
  info_ = infos[chosen];
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  EnabledFeatures features(info_, options.pipeline_statistics);
  pipeline_statistics_ = options.pipeline_statistics && info_.pipeline_statistics;
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = info_.compute_queue_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo create{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &features.core};
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue;
  create.enabledExtensionCount = static_cast<uint32_t>(features.extensions.size());
  create.ppEnabledExtensionNames = features.extensions.data();
  vk_check(vkCreateDevice(physical_, &create, nullptr, &device_),
           ("vkCreateDevice for " + info_.name).c_str());
  vkGetDeviceQueue(device_, info_.compute_queue_family, 0, &queue_);

  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.queueFamilyIndex = info_.compute_queue_family;
  vk_check(vkCreateCommandPool(device_, &pool, nullptr, &pool_), "vkCreateCommandPool");
  std::optional<std::filesystem::path> cache_dir;
  if (options.save_pipeline_cache)
    cache_dir = options.pipeline_cache_dir.value_or(codegen::default_cache_dir());
  pipeline_cache_ = std::make_unique<PipelineCache>(device_, info_, cache_dir);
}

Context::~Context() { release(); }

void Context::release() noexcept {
  if (device_) vkDeviceWaitIdle(device_);
  pipeline_cache_.reset();
  if (pool_) vkDestroyCommandPool(device_, pool_, nullptr);
  if (device_) vkDestroyDevice(device_, nullptr);
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    destroy(instance_, messenger_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
  pool_ = VK_NULL_HANDLE;
  device_ = VK_NULL_HANDLE;
  messenger_ = VK_NULL_HANDLE;
  instance_ = VK_NULL_HANDLE;
}

uint32_t Context::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                              VkMemoryPropertyFlags preferred) const {
  std::optional<uint32_t> fallback;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    const VkMemoryPropertyFlags flags = memory_.memoryTypes[i].propertyFlags;
    if (!(type_bits & (1u << i)) || (flags & required) != required) continue;
    if ((flags & preferred) == preferred) return i;
    if (!fallback) fallback = i;
  }
  if (fallback) return *fallback;
  char flags[64];
  std::snprintf(flags, sizeof flags, "0x%x for memory type bits 0x%x", required, type_bits);
  throw std::runtime_error("device " + info_.name + " has no memory type with property flags " +
                           flags);
}

VkCommandBuffer Context::allocate_command_buffer() {
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  std::lock_guard lock(queue_mutex_);
  vk_check(vkAllocateCommandBuffers(device_, &alloc, &cmd), "vkAllocateCommandBuffers");
  return cmd;
}

void Context::free_command_buffer(VkCommandBuffer cmd) {
  std::lock_guard lock(queue_mutex_);
  vkFreeCommandBuffers(device_, pool_, 1, &cmd);
}

void Context::submit_and_wait(VkCommandBuffer cmd, VkFence fence) {
  submit(cmd, fence);
  wait(fence);
}

void Context::submit(VkCommandBuffer cmd, VkFence fence) {
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  std::lock_guard lock(queue_mutex_);
  vk_check(vkQueueSubmit(queue_, 1, &submit, fence), "vkQueueSubmit");
}

void Context::wait(VkFence fence) {
  // Poll first: a decode token is a few ms of GPU work, and a blocking wait's wake-up costs tens
  // of microseconds on top of it. Work that runs longer falls back to blocking. Not on a CPU
  // device (lavapipe): there the polling thread would take a core from the work itself.
  const auto spin = info_.type == DeviceType::Cpu ? std::chrono::milliseconds(0) : std::chrono::milliseconds(20);
  const auto spin_until = std::chrono::steady_clock::now() + spin;
  VkResult status = vkGetFenceStatus(device_, fence);
  while (status == VK_NOT_READY && std::chrono::steady_clock::now() < spin_until) status = vkGetFenceStatus(device_, fence);
  if (status == VK_NOT_READY) status = vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX);
  vk_check(status, "waiting for the GPU (fence)");
  vk_check(vkResetFences(device_, 1, &fence), "vkResetFences");
}

void Context::run_once(const std::function<void(VkCommandBuffer)>& record) {
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence = VK_NULL_HANDLE;
  vk_check(vkCreateFence(device_, &fence_info, nullptr, &fence), "vkCreateFence");
  VkCommandBuffer cmd = allocate_command_buffer();
  try {
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vk_check(vkBeginCommandBuffer(cmd, &begin), "vkBeginCommandBuffer");
    record(cmd);
    vk_check(vkEndCommandBuffer(cmd), "vkEndCommandBuffer");
    submit_and_wait(cmd, fence);
  } catch (...) {
    free_command_buffer(cmd);
    vkDestroyFence(device_, fence, nullptr);
    throw;
  }
  free_command_buffer(cmd);
  vkDestroyFence(device_, fence, nullptr);
}

}  // namespace bdsl::rt
