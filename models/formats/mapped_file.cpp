#include "models/formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace bdsl::models {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what) {
  throw std::runtime_error(fmt::format("{}: {}: {}", path.string(), what, std::strerror(errno)));
}

int64_t mtime_ns(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path, "cannot open");
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail(path, "cannot stat");
    if (!S_ISREG(st.st_mode)) throw std::runtime_error(fmt::format("{}: not a regular file", path.string()));
    size_ = static_cast<std::size_t>(st.st_size);
    mtime_ns_ = mtime_ns(st);
    if (size_ == 0) return;
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) fail(path, "cannot mmap");
    data_ = static_cast<const std::byte*>(p);
  } catch (...) {
    release();
    throw;
  }
}

void MappedFile::done_reading(std::span<const std::byte> range) const noexcept {
  if (range.empty() || !data_) return;
  // Only the file's own pages: a range elsewhere (a host copy) is left alone.
  const auto* first = reinterpret_cast<const std::byte*>(data_);
  if (range.data() < first || range.data() + range.size() > first + size_) return;
  // Whole pages inside the range only: the pages at its ends may hold bytes still wanted.
  const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const auto start = (reinterpret_cast<uintptr_t>(range.data()) + page - 1) & ~(page - 1);
  const auto end = (reinterpret_cast<uintptr_t>(range.data()) + range.size()) & ~(page - 1);
  if (end > start) ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
}

void MappedFile::check_unchanged() const {
  if (fd_ < 0) return;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail(path_, "cannot stat");
  if (static_cast<std::size_t>(st.st_size) != size_)
    throw std::runtime_error(fmt::format("{}: the file changed on disk while it was being read: {} bytes when opened, now {}",
                                         path_.string(), size_, st.st_size));
  if (mtime_ns(st) != mtime_ns_)
    throw std::runtime_error(fmt::format("{}: the file changed on disk while it was being read (written since it was opened)",
                                         path_.string()));
}

void MappedFile::will_read(std::span<const std::byte> range) const noexcept {
  if (range.empty() || !data_) return;
  // madvise wants a page-aligned start; advice only, so a failure is harmless.
  const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(range.data()) & ~(page - 1);
  const auto end = reinterpret_cast<uintptr_t>(range.data()) + range.size();
  ::madvise(reinterpret_cast<void*>(start), end - start, MADV_WILLNEED);
}

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    mtime_ns_ = other.mtime_ns_;
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

}  // namespace bdsl::models
