// A read-only memory map of a whole file, released on destruction (RAII). Move-only.
#pragma once
#include <cstddef>
#include <filesystem>
#include <span>

namespace bdsl::models {

class MappedFile {
 public:
  // Throws std::runtime_error naming the path and the system error. An empty file maps to an
  // empty span (mmap cannot map zero bytes).
  explicit MappedFile(const std::filesystem::path& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  // Asks the kernel to read `range` (inside bytes()) ahead: a model load about to read it all.
  void will_read(std::span<const std::byte> range) const noexcept;
  // Gives the pages of `range` back (they stay in the page cache; a later read maps them again):
  // a model load done with its bytes, so they no longer count in the process's resident memory.
  // A range outside the mapping is ignored.
  void done_reading(std::span<const std::byte> range) const noexcept;
  // Throws std::runtime_error naming the file when it is no longer as it was mapped: shorter or
  // longer, or written since (a truncated file would fault on the next read of its lost pages, so
  // a long read checks before each part).
  void check_unchanged() const;

 private:
  void release() noexcept;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;  // kept open to watch the mapped file itself, whatever its path now names
  std::filesystem::path path_;
  int64_t mtime_ns_ = 0;
};

}  // namespace bdsl::models
