// Streaming uploads: host bytes go to the device through a ring of host-visible staging buffers.
// Each chunk's copy is submitted as soon as the host has written it, so the host writes the next
// chunk while the device copies the last, and no staging buffer is allocated per upload (a model
// load is hundreds of tensors). Into a buffer made host-visible (BufferOptions::host_visible) it
// writes directly. Nothing of the data is kept: the caller's span may be reused once upload()
// returns. If an upload fails, every copy in flight is waited for before the error leaves it.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/buffer.h"

namespace bdsl::rt {

class Context;

class UploadRing {
 public:
  static constexpr uint64_t kDefaultSlotBytes = 32ull << 20;
  static constexpr uint32_t kDefaultSlots = 3;

  explicit UploadRing(Context& ctx, uint64_t slot_bytes = kDefaultSlotBytes, uint32_t slots = kDefaultSlots);
  ~UploadRing();  // waits for every copy still in flight
  UploadRing(const UploadRing&) = delete;
  UploadRing& operator=(const UploadRing&) = delete;

  // data -> dst at `offset`, checked as Buffer::upload_bytes checks it. dst must outlive the
  // copies (finish() or the ring's end).
  void upload(Buffer& dst, std::span<const std::byte> data, uint64_t offset = 0);
  // Returns once every copy issued so far has landed; its writes are then visible to whatever the
  // context's queue runs next.
  void finish();

  uint64_t slot_bytes() const { return slot_bytes_; }

 private:
  struct Slot {
    Buffer staging;
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    bool in_flight = false;
  };
  void wait(Slot& s);
  void copy_chunks(Buffer& dst, std::span<const std::byte> data, uint64_t offset);

  Context& ctx_;
  uint64_t slot_bytes_;
  std::vector<Slot> slots_;
  uint32_t next_ = 0;
};

}  // namespace bdsl::rt
