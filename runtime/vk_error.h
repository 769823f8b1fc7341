// Vulkan results as exceptions: every failed call names what was being done and the VkResult.
#pragma once
#include <vulkan/vulkan.h>

#include <stdexcept>
#include <string>

namespace bdsl::rt {

class VulkanError : public std::runtime_error {
 public:
  VulkanError(const std::string& what, VkResult result);
  VkResult result() const { return result_; }

 private:
  VkResult result_;
};

const char* to_string(VkResult result);

inline void vk_check(VkResult result, const char* what) {
  if (result != VK_SUCCESS) throw VulkanError(what, result);
}

}  // namespace bdsl::rt
