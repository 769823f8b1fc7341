#include "runtime/upload_ring.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/barrier.h"
#include "runtime/context.h"
#include "runtime/vk_error.h"

namespace bdsl::rt {

UploadRing::UploadRing(Context& ctx, uint64_t slot_bytes, uint32_t slots) : ctx_(ctx), slot_bytes_(slot_bytes) {
  if (slot_bytes == 0 || slots == 0) throw std::invalid_argument("UploadRing: needs at least one slot of at least one byte");
  slots_.resize(slots);
  try {
    for (uint32_t i = 0; i < slots; ++i) {
      Slot& s = slots_[i];
      s.staging = Buffer(ctx, slot_bytes, {.host_visible = true, .name = "upload ring slot " + std::to_string(i)});
      VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
      vk_check(vkCreateFence(ctx.device(), &fence_info, nullptr, &s.fence), "vkCreateFence");
    }
  } catch (...) {
    for (Slot& s : slots_)
      if (s.fence) vkDestroyFence(ctx.device(), s.fence, nullptr);
    throw;
  }
}

UploadRing::~UploadRing() {
  for (Slot& s : slots_) {
    try {
      if (s.in_flight) wait(s);
    } catch (...) {  // a lost device: nothing more to wait for
    }
    if (s.cmd) ctx_.free_command_buffer(s.cmd);
    vkDestroyFence(ctx_.device(), s.fence, nullptr);
  }
}

void UploadRing::wait(Slot& s) {
  ctx_.wait(s.fence);  // resets it
  s.in_flight = false;
  ctx_.free_command_buffer(std::exchange(s.cmd, VK_NULL_HANDLE));
}

namespace {
// The host's part of an upload is a memcpy from (often freshly mapped) memory: split over a few
// threads, page faults and copying of one chunk proceed in parallel.
void copy_in_parallel(Buffer& staging, std::span<const std::byte> data) {
  constexpr uint64_t kPerThread = 4ull << 20;
  const uint32_t threads = uint32_t(std::min<uint64_t>({std::max(1u, std::thread::hardware_concurrency()), 8,
                                                        (data.size() + kPerThread - 1) / kPerThread}));
  if (threads <= 1) return staging.upload_bytes(data);
  const uint64_t per = (data.size() + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (uint32_t t = 1; t < threads; ++t) {
    const uint64_t first = std::min<uint64_t>(data.size(), t * per);
    pool.emplace_back([&staging, part = data.subspan(first, std::min(per, data.size() - first)), first] {
      staging.upload_bytes(part, first);
    });
  }
  staging.upload_bytes(data.subspan(0, std::min(per, data.size())));
  for (auto& th : pool) th.join();
}
}  // namespace

void UploadRing::upload(Buffer& dst, std::span<const std::byte> data, uint64_t offset) {
  if (dst.host_visible() || data.empty()) return dst.upload_bytes(data, offset);  // a direct write (and its checks)
  dst.check_range(offset, data.size(), "upload");
  dst.check_writable("upload");
  try {
    copy_chunks(dst, data, offset);
  } catch (...) {
    // Nothing may still copy into dst (the caller may free it) or hold a slot's command buffer.
    for (Slot& s : slots_) {
      try {
        if (s.in_flight) wait(s);
      } catch (...) {
      }
      if (s.cmd) ctx_.free_command_buffer(std::exchange(s.cmd, VK_NULL_HANDLE));
      s.in_flight = false;
    }
    throw;
  }
}

void UploadRing::copy_chunks(Buffer& dst, std::span<const std::byte> data, uint64_t offset) {
  for (uint64_t done = 0; done < data.size();) {
    Slot& s = slots_[next_];
    next_ = (next_ + 1) % uint32_t(slots_.size());
    if (s.in_flight) wait(s);
    const uint64_t n = std::min<uint64_t>(slot_bytes_, data.size() - done);
    copy_in_parallel(s.staging, data.subspan(done, n));
    s.cmd = ctx_.allocate_command_buffer();
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vk_check(vkBeginCommandBuffer(s.cmd, &begin), "vkBeginCommandBuffer");
    // Earlier submissions' work on dst lands before the copy overwrites it.
    memory_barrier(s.cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT | VK_ACCESS_MEMORY_READ_BIT,
                   VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
    const VkBufferCopy region{0, offset + done, n};
    vkCmdCopyBuffer(s.cmd, s.staging.handle(), dst.handle(), 1, &region);
    barrier_to_everything(s.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
    vk_check(vkEndCommandBuffer(s.cmd), "vkEndCommandBuffer");
    ctx_.submit(s.cmd, s.fence);
    s.in_flight = true;
    done += n;
  }
}

void UploadRing::finish() {
  for (Slot& s : slots_)
    if (s.in_flight) wait(s);
}

}  // namespace bdsl::rt
