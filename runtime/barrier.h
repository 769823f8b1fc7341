// One global memory barrier: cheaper to reason about than per-buffer barriers and, for compute
// on one queue, just as fast on the drivers we target.
#pragma once
#include <vulkan/vulkan.h>

namespace bdsl::rt {

inline void memory_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stages,
                           VkAccessFlags src_access, VkPipelineStageFlags dst_stages,
                           VkAccessFlags dst_access) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = src_access;
  barrier.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(cmd, src_stages, dst_stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

// Makes every earlier device write available to every later command and to the host: ends each
// submission, so the next one (or a download, or the host) sees its results.
inline void barrier_to_everything(VkCommandBuffer cmd, VkPipelineStageFlags src_stages,
                                  VkAccessFlags src_access) {
  memory_barrier(cmd, src_stages, src_access,
                 VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                 VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_HOST_READ_BIT);
}

}  // namespace bdsl::rt
