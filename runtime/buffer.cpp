#include "runtime/buffer.h"

#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <utility>

#include "runtime/barrier.h"
#include "runtime/context.h"
#include "runtime/vk_error.h"

namespace bdsl::rt {
namespace {

std::string label(const std::string& name) {
  return name.empty() ? "buffer" : "buffer '" + name + "'";
}

constexpr VkBufferUsageFlags kUsage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT;

}  // namespace

BufferSlice::BufferSlice(const Buffer& whole) : buffer(&whole), offset(0), bytes(whole.size()) {}

BufferSlice::BufferSlice(const Buffer& b, uint64_t offset_, uint64_t bytes_)
    : buffer(&b), offset(offset_), bytes(bytes_) {
  b.check_range(offset_, bytes_, "slice");
  if (bytes_ == 0) throw std::invalid_argument(label(b.name()) + ": an empty slice is not allowed");
}

VkBuffer BufferSlice::handle() const { return buffer ? buffer->handle() : VK_NULL_HANDLE; }

uint64_t BufferSlice::vk_offset() const { return offset + (buffer ? buffer->origin() : 0); }

Buffer::Buffer(Context& ctx, uint64_t bytes, BufferOptions options)
    : ctx_(&ctx), bytes_(bytes), name_(std::move(options.name)), holds_(options.holds) {
  const DeviceInfo& info = ctx.info();
  if (bytes == 0) throw std::invalid_argument(label(name_) + ": size 0 is not allowed");
  if (info.max_memory_allocation && bytes > info.max_memory_allocation)
    throw std::invalid_argument(label(name_) + ": " + std::to_string(bytes) +
                                " bytes exceed the device's max allocation of " +
                                std::to_string(info.max_memory_allocation) + " bytes");
  VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  create.size = bytes;
  create.usage = kUsage | (options.indirect ? VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT : 0);
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  vk_check(vkCreateBuffer(ctx.device(), &create, nullptr, &buffer_), "vkCreateBuffer");
  try {
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx.device(), buffer_, &req);
    const VkMemoryPropertyFlags host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex =
        options.host_visible
            ? ctx.memory_type(req.memoryTypeBits, host,
                              options.gpu_reads_often ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT : VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
            : ctx.memory_type(req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    vk_check(vkAllocateMemory(ctx.device(), &alloc, nullptr, &memory_),
             ("vkAllocateMemory for " + label(name_) + " (" + std::to_string(bytes) + " bytes)")
                 .c_str());
    vk_check(vkBindBufferMemory(ctx.device(), buffer_, memory_, 0), "vkBindBufferMemory");
    if (options.host_visible) {
      void* mapped = nullptr;
      vk_check(vkMapMemory(ctx.device(), memory_, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory");
      mapped_ = static_cast<std::byte*>(mapped);
    }
  } catch (...) {
    release();
    throw;
  }
}

std::optional<Buffer> Buffer::over_host(Context& ctx, std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                                        BufferOptions options) {
  const DeviceInfo& info = ctx.info();
  const uint64_t align = info.host_import_alignment;
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  // The import covers whole blocks of `align` around the bytes: readable only when a block is
  // not larger than a page (a readable byte's page is mapped whole).
  if (bytes.empty() || align == 0 || align > page || page % align) return std::nullopt;
  const auto at = reinterpret_cast<uintptr_t>(bytes.data());
  const uintptr_t first = at / align * align;
  const uintptr_t end = (at + bytes.size() + align - 1) / align * align;
  if (info.max_memory_allocation && end - first > info.max_memory_allocation) return std::nullopt;
  auto host_pointer_properties = reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(
      vkGetDeviceProcAddr(ctx.device(), "vkGetMemoryHostPointerPropertiesEXT"));
  if (!host_pointer_properties) return std::nullopt;
  constexpr auto kHost = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkMemoryHostPointerPropertiesEXT pointer{VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
  if (host_pointer_properties(ctx.device(), kHost, reinterpret_cast<void*>(first), &pointer) != VK_SUCCESS ||
      pointer.memoryTypeBits == 0)
    return std::nullopt;

  // The buffer starts at the last offset before the bytes at which the device binds one (its
  // memory requirements' alignment), `origin` bytes before them: a binding offset must still be
  // a multiple of the storage buffer alignment.
  const uint64_t offset = at - first;
  Buffer b;
  b.ctx_ = &ctx;
  b.bytes_ = bytes.size();
  b.name_ = std::move(options.name);
  b.holds_ = options.holds;
  VkExternalMemoryBufferCreateInfo external{VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO};
  external.handleTypes = kHost;
  VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, &external};
  create.usage = kUsage | (options.indirect ? VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT : 0);
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkMemoryRequirements req{};
  for (int attempt = 0; attempt < 2; ++attempt) {  // the alignment is known once a buffer exists
    if (b.buffer_) vkDestroyBuffer(ctx.device(), std::exchange(b.buffer_, VK_NULL_HANDLE), nullptr);
    create.size = bytes.size() + b.origin_;
    vk_check(vkCreateBuffer(ctx.device(), &create, nullptr, &b.buffer_), "vkCreateBuffer");
    vkGetBufferMemoryRequirements(ctx.device(), b.buffer_, &req);
    if (req.alignment == 0 || offset % req.alignment == b.origin_) break;
    b.origin_ = offset % req.alignment;
  }
  const uint64_t bind_at = offset - b.origin_;
  const uint32_t types = req.memoryTypeBits & pointer.memoryTypeBits;
  if ((req.alignment && bind_at % req.alignment) || b.origin_ % std::max<uint64_t>(info.min_storage_buffer_offset_alignment, 4) ||
      bind_at + req.size > end - first || types == 0)
    return std::nullopt;  // b frees its buffer
  VkImportMemoryHostPointerInfoEXT import{VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT};
  import.handleType = kHost;
  import.pHostPointer = reinterpret_cast<void*>(first);
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, &import};
  alloc.allocationSize = end - first;
  alloc.memoryTypeIndex = ctx.memory_type(types, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  vk_check(vkAllocateMemory(ctx.device(), &alloc, nullptr, &b.memory_),
           ("vkAllocateMemory importing host memory for " + label(b.name_) + " (" + std::to_string(bytes.size()) + " bytes)")
               .c_str());
  vk_check(vkBindBufferMemory(ctx.device(), b.buffer_, b.memory_, bind_at), "vkBindBufferMemory");
  b.host_owner_ = owner ? std::move(owner) : std::make_shared<int>(0);  // read_only() either way
  return b;
}

Buffer::~Buffer() { release(); }

void Buffer::release() noexcept {
  if (!ctx_) return;
  if (mapped_) vkUnmapMemory(ctx_->device(), memory_);
  if (buffer_) vkDestroyBuffer(ctx_->device(), buffer_, nullptr);
  if (memory_) vkFreeMemory(ctx_->device(), memory_, nullptr);
  mapped_ = nullptr;
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  host_owner_.reset();  // after the memory that views its bytes
}

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this == &other) return *this;
  release();
  ctx_ = std::exchange(other.ctx_, nullptr);
  buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
  memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
  bytes_ = std::exchange(other.bytes_, 0);
  origin_ = std::exchange(other.origin_, 0);
  mapped_ = std::exchange(other.mapped_, nullptr);
  name_ = std::move(other.name_);
  holds_ = other.holds_;
  host_owner_ = std::move(other.host_owner_);
  return *this;
}

void Buffer::check_range(uint64_t offset, uint64_t bytes, const char* what) const {
  if (!buffer_) throw std::logic_error(std::string(what) + ": the buffer is empty (moved from?)");
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw std::out_of_range(label(name_) + ": " + what + " of " + std::to_string(bytes) +
                            " bytes at offset " + std::to_string(offset) +
                            " does not fit in its " + std::to_string(bytes_) + " bytes");
}

void Buffer::check_writable(const char* what) const {
  if (read_only())
    throw std::logic_error(label(name_) + ": " + what + " into a read-only view of host memory (Buffer::over_host)");
}

std::span<uint32_t> Buffer::host_words() {
  if (!mapped_) throw std::logic_error(label(name_) + ": host_words of a buffer the host cannot map (not host_visible)");
  return {reinterpret_cast<uint32_t*>(mapped_), bytes_ / 4};
}

void Buffer::upload_bytes(std::span<const std::byte> data, uint64_t offset) {
  check_range(offset, data.size(), "upload");
  check_writable("upload");
  if (data.empty()) return;
  if (mapped_) std::memcpy(mapped_ + offset, data.data(), data.size());
  else copy_via_staging(data, {}, offset);
}

void Buffer::download_bytes(std::span<std::byte> out, uint64_t offset) const {
  check_range(offset, out.size(), "download");
  if (out.empty()) return;
  if (mapped_) std::memcpy(out.data(), mapped_ + offset, out.size());
  else copy_via_staging({}, out, offset);
}

// Exactly one of `in` (upload) and `out` (download) is non-empty.
void Buffer::copy_via_staging(std::span<const std::byte> in, std::span<std::byte> out,
                              uint64_t offset) const {
  const uint64_t bytes = in.empty() ? out.size() : in.size();
  Buffer staging(*ctx_, bytes, {.host_visible = true, .name = name_ + " staging"});
  if (!in.empty()) std::memcpy(staging.mapped_, in.data(), bytes);
  const VkBufferCopy region{in.empty() ? origin_ + offset : 0, in.empty() ? 0 : origin_ + offset, bytes};
  const VkBuffer src = in.empty() ? buffer_ : staging.buffer_;
  const VkBuffer dst = in.empty() ? staging.buffer_ : buffer_;
  ctx_->run_once([&](VkCommandBuffer cmd) {
    // Earlier submissions' writes (kernels) must land before the copy reads or overwrites.
    memory_barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                   VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    vkCmdCopyBuffer(cmd, src, dst, 1, &region);
    barrier_to_everything(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
  });
  if (!out.empty()) std::memcpy(out.data(), staging.mapped_, bytes);
}

void Buffer::fill(uint32_t word, uint64_t offset, uint64_t bytes) {
  if (bytes == VK_WHOLE_SIZE) bytes = offset <= bytes_ ? bytes_ - offset : 0;
  check_range(offset, bytes, "fill");
  check_writable("fill");
  if (offset % 4 || bytes % 4)
    throw std::invalid_argument(label(name_) + ": fill needs offset and size multiples of 4, got " +
                                std::to_string(offset) + " and " + std::to_string(bytes));
  if (bytes == 0) return;
  ctx_->run_once([&](VkCommandBuffer cmd) {
    memory_barrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                   VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
    vkCmdFillBuffer(cmd, buffer_, offset, bytes, word);
    barrier_to_everything(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
  });
}

}  // namespace bdsl::rt
