// Storage buffers: one VkBuffer + VkDeviceMemory each (RAII, move-only). Device-local by default,
// filled and read through a staging copy; host-visible buffers are mapped directly; a view of
// host memory (over_host) is read by the device where the bytes lie.
// Every size and offset is checked and a bad one names the buffer.
#pragma once
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "dsl/type.h"

namespace bdsl::rt {

class Context;
class Buffer;

struct BufferOptions {
  bool host_visible = false;  // mappable (host-coherent, cached when possible), e.g. for readback
  std::string name;           // shown in error messages
  // With host_visible: prefer memory in the device's own heap that the host can still write
  // (resizable BAR) over host-cached system memory. For small inputs the host writes and the
  // GPU reads in every dispatch (the step state): in system memory each of those reads is a
  // round trip over the bus (PCIe) on a discrete GPU.
  bool gpu_reads_often = false;
  // The scalar kind of the buffer's elements, where it has one: a dispatch that binds it where a
  // kernel reads another kind (f32 where it reads u32) is refused. Unset: any kind (raw words,
  // packed weights read as u32 or uvec4).
  std::optional<ScalarKind> holds;
  bool indirect = false;  // also the source of indirect dispatch arguments (vkCmdDispatchIndirect)
};

// A byte range of a buffer, as bound to a kernel. A Buffer converts to its whole range.
struct BufferSlice {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t bytes = 0;

  BufferSlice() = default;
  BufferSlice(const Buffer& whole);  // NOLINT: implicit, so `{a, b.slice(...), c}` reads well
  BufferSlice(const Buffer& b, uint64_t offset_, uint64_t bytes_);
  BufferSlice(const Buffer&& temporary) = delete;  // the graph would keep a dead buffer's handle
  VkBuffer handle() const;
  uint64_t vk_offset() const;  // the offset in handle(): `offset` past the buffer's origin()
};

class Buffer {
 public:
  Buffer() = default;
  Buffer(Context& ctx, uint64_t bytes, BufferOptions options = {});
  ~Buffer();
  // A read-only buffer over `bytes` of host memory that the device reads in place, no copy
  // (VK_EXT_external_memory_host: a CPU device's or an integrated GPU's own memory, e.g. a
  // mapped model file). The buffer keeps `owner` (what keeps the bytes readable) alive. Nothing
  // where the device cannot read these bytes in place: no extension, an import alignment past the
  // page size, or an offset in their page at which it binds no buffer. Vulkan errors throw.
  static std::optional<Buffer> over_host(Context& ctx, std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                                         BufferOptions options = {});
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  uint64_t size() const { return bytes_; }
  VkBuffer handle() const { return buffer_; }
  bool host_visible() const { return mapped_ != nullptr; }
  // A view of host memory (over_host): uploads, fills and kernels that write it are refused.
  bool read_only() const { return host_owner_ != nullptr; }
  // Where byte 0 of this buffer lies in its VkBuffer: 0, except for a view of host memory whose
  // bytes start past the offset the device binds a buffer at (Vulkan calls add it).
  uint64_t origin() const { return origin_; }
  const std::string& name() const { return name_; }
  std::optional<ScalarKind> holds() const { return holds_; }
  explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }

  // `bytes` at `offset` of this buffer; throws when the range is outside it.
  BufferSlice slice(uint64_t offset, uint64_t bytes) const { return {*this, offset, bytes}; }

  // A host-visible buffer's memory as 32-bit words, for the host to write in place (what
  // upload_bytes copies into). Throws for a buffer that is not host-visible.
  std::span<uint32_t> host_words();

  void upload_bytes(std::span<const std::byte> data, uint64_t offset = 0);
  void download_bytes(std::span<std::byte> out, uint64_t offset = 0) const;
  void fill(uint32_t word, uint64_t offset = 0, uint64_t bytes = VK_WHOLE_SIZE);  // vkCmdFillBuffer

  template <class T>
  void upload(std::span<const T> data, uint64_t offset = 0) {
    static_assert(std::is_trivially_copyable_v<T>);
    upload_bytes(std::as_bytes(data), offset);
  }
  template <class T>
  void upload(const std::vector<T>& data, uint64_t offset = 0) {
    upload(std::span<const T>(data), offset);
  }
  // `count` elements from `offset`; by default everything from `offset` to the end.
  template <class T>
  std::vector<T> download(uint64_t offset = 0, uint64_t count = UINT64_MAX) const {
    static_assert(std::is_trivially_copyable_v<T>);
    if (count == UINT64_MAX) count = (offset < bytes_ ? bytes_ - offset : 0) / sizeof(T);
    std::vector<T> out(count);
    download_bytes(std::as_writable_bytes(std::span<T>(out)), offset);
    return out;
  }

  // Throws unless [offset, offset + bytes) lies inside the buffer; `what` names the operation.
  void check_range(uint64_t offset, uint64_t bytes, const char* what) const;
  // Throws for a read-only buffer (over_host); `what` names the operation.
  void check_writable(const char* what) const;

 private:
  void release() noexcept;
  void copy_via_staging(std::span<const std::byte> in, std::span<std::byte> out,
                        uint64_t offset) const;

  Context* ctx_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t bytes_ = 0;
  uint64_t origin_ = 0;
  std::byte* mapped_ = nullptr;
  std::string name_;
  std::optional<ScalarKind> holds_;
  std::shared_ptr<const void> host_owner_;  // over_host: what keeps the viewed bytes readable
};

}  // namespace bdsl::rt
