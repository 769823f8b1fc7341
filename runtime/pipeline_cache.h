// The device's VkPipelineCache, loaded from and saved to
// `<dir>/pipeline-cache-<vendor>-<device>-<driver>.bin`. A file whose header does not match this
// device and driver (or is short) is ignored, never handed to the driver.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/device_info.h"

namespace bdsl::rt {

class PipelineCache {
 public:
  // `dir` = std::nullopt: an in-memory cache only.
  PipelineCache(VkDevice device, const DeviceInfo& info, std::optional<std::filesystem::path> dir);
  ~PipelineCache();  // saves when there is a directory
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  VkPipelineCache handle() const { return cache_; }
  const std::optional<std::filesystem::path>& file() const { return file_; }
  bool loaded_from_disk() const { return loaded_; }
  void save() const;  // atomically (temp file + rename); failures only warn

  // Whether `data` starts with a VkPipelineCacheHeaderVersionOne for this device and driver.
  static bool header_matches(std::string_view data, const DeviceInfo& info);
  static std::string file_name(const DeviceInfo& info);

 private:
  VkDevice device_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::optional<std::filesystem::path> file_;
  bool loaded_ = false;
};

}  // namespace bdsl::rt
