// The Vulkan context: instance (with the Khronos validation layer on request), the chosen device
// with the features kernels may use enabled, one compute queue, a command pool and the pipeline
// cache. Everything the runtime creates hangs off one Context and must die before it.
#pragma once
#include <vulkan/vulkan.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/device_info.h"
#include "runtime/pipeline_cache.h"
#include "runtime/validation_log.h"

namespace bdsl::rt {

struct ContextOptions {
  // An index or a case-insensitive name substring; empty: $BDSL_DEVICE, else the fastest device.
  std::string device;
  // The Khronos validation layer; std::nullopt: on when $BDSL_VALIDATION=1.
  std::optional<bool> validation;
  // Where the VkPipelineCache is kept; std::nullopt: the shader cache directory.
  std::optional<std::filesystem::path> pipeline_cache_dir;
  bool save_pipeline_cache = true;  // false: an in-memory VkPipelineCache only
  // Pipelines keep the driver's statistics (registers, ...: Pipeline::statistics()) where the
  // device has VK_KHR_pipeline_executable_properties. For the bench; some drivers then skip caches.
  bool pipeline_statistics = false;
};

class Context {
 public:
  explicit Context(const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Every device present, without creating one (a temporary instance).
  static std::vector<DeviceInfo> list_devices();

  const DeviceInfo& info() const { return info_; }
  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical_device() const { return physical_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  PipelineCache& pipeline_cache() { return *pipeline_cache_; }

  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  bool pipeline_statistics() const { return pipeline_statistics_; }  // enabled and supported
  // Outlives the context, so a test can check it after everything was destroyed.
  std::shared_ptr<const ValidationLog> validation_log() const { return log_; }

  // A memory type index allowed by `type_bits` with all `required` flags, preferring `preferred`.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                       VkMemoryPropertyFlags preferred) const;

  // Command buffers from the context's pool (the pool is guarded by the context's lock).
  VkCommandBuffer allocate_command_buffer();
  void free_command_buffer(VkCommandBuffer cmd);
  // Submits one recorded command buffer and waits for `fence` (reset before returning).
  void submit_and_wait(VkCommandBuffer cmd, VkFence fence);
  // The two halves of submit_and_wait: submit returns at once; wait polls `fence` (then blocks),
  // throws on a device error, and resets the fence.
  void submit(VkCommandBuffer cmd, VkFence fence);
  void wait(VkFence fence);
  // Records `record` into a fresh command buffer, submits it and waits: uploads, downloads, fills.
  void run_once(const std::function<void(VkCommandBuffer)>& record);

 private:
  void create_instance(bool validation);
  void create_device(const ContextOptions& options);
  void release() noexcept;  // destroys the handles in reverse order of creation

  std::shared_ptr<ValidationLog> log_ = std::make_shared<ValidationLog>();
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  DeviceInfo info_;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::mutex queue_mutex_;  // the queue and the command pool need external synchronisation
  std::unique_ptr<PipelineCache> pipeline_cache_;
  bool pipeline_statistics_ = false;
};

}  // namespace bdsl::rt
