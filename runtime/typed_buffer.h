// A buffer of `count` elements of T: sizes, offsets and transfers in elements, not bytes, and the
// element kind recorded (BufferOptions::holds) so a dispatch that binds it where a kernel reads
// another kind is refused. Converts to a BufferSlice like Buffer does.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/buffer.h"

namespace bdsl::rt {

template <class T>
class TypedBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "a typed buffer holds trivially copyable elements");

 public:
  TypedBuffer(Context& ctx, uint64_t count, BufferOptions options = {})
      : buffer_(ctx, bytes_of(count, options.name), with_kind(std::move(options))), count_(count) {}
  TypedBuffer(Context& ctx, std::span<const T> data, BufferOptions options = {})
      : TypedBuffer(ctx, data.size(), std::move(options)) {
    upload(data);
  }
  TypedBuffer(Context& ctx, const std::vector<T>& data, BufferOptions options = {})
      : TypedBuffer(ctx, std::span<const T>(data), std::move(options)) {}

  uint64_t size() const { return count_; }
  Buffer& buffer() { return buffer_; }
  const Buffer& buffer() const { return buffer_; }

  void upload(std::span<const T> data, uint64_t first = 0) {
    check(first, data.size(), "upload");
    buffer_.upload(data, first * sizeof(T));
  }
  void upload(const std::vector<T>& data, uint64_t first = 0) { upload(std::span<const T>(data), first); }
  // `count` elements from `first`; by default everything from `first` to the end.
  std::vector<T> download(uint64_t first = 0, uint64_t count = UINT64_MAX) const {
    if (count == UINT64_MAX) count = first < count_ ? count_ - first : 0;
    check(first, count, "download");
    return buffer_.download<T>(first * sizeof(T), count);
  }
  // Elements [first, first + count) as a binding.
  BufferSlice slice(uint64_t first, uint64_t count) const {
    check(first, count, "slice");
    return buffer_.slice(first * sizeof(T), count * sizeof(T));
  }
  operator BufferSlice() const& { return buffer_; }  // NOLINT: binds like a Buffer
  operator BufferSlice() const&& = delete;           // the graph would keep a dead buffer's handle

 private:
  static uint64_t bytes_of(uint64_t count, const std::string& name) {
    if (count > UINT64_MAX / sizeof(T))
      throw std::invalid_argument("buffer '" + name + "': " + std::to_string(count) + " elements overflow");
    return count * sizeof(T);
  }
  static BufferOptions with_kind(BufferOptions options) {
    if (!options.holds) {
      if constexpr (std::is_same_v<T, float>) options.holds = ScalarKind::F32;
      else if constexpr (std::is_same_v<T, uint32_t>) options.holds = ScalarKind::U32;
      else if constexpr (std::is_same_v<T, int32_t>) options.holds = ScalarKind::I32;
      else if constexpr (std::is_same_v<T, uint64_t>) options.holds = ScalarKind::U64;
      else if constexpr (std::is_same_v<T, int64_t>) options.holds = ScalarKind::I64;
      else if constexpr (std::is_same_v<T, int8_t>) options.holds = ScalarKind::I8;
    }
    return options;
  }
  void check(uint64_t first, uint64_t count, const char* what) const {
    if (first > count_ || count > count_ - first)
      throw std::out_of_range("buffer '" + buffer_.name() + "': " + what + " of elements " + std::to_string(first) +
                              ".." + std::to_string(first + count) + " is outside its " + std::to_string(count_));
  }

  Buffer buffer_;
  uint64_t count_;
};

}  // namespace bdsl::rt
