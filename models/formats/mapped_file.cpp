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

// Closes the descriptor on every path out of the constructor; the map outlives it.
struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) fail(path, "cannot open");
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail(path, "cannot stat");
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error(fmt::format("{}: not a regular file", path.string()));
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, f.fd, 0);
  if (p == MAP_FAILED) fail(path, "cannot mmap");
  data_ = static_cast<const std::byte*>(p);
}

void MappedFile::will_read(std::span<const std::byte> range) const noexcept {
  if (range.empty() || !data_) return;
  // madvise wants a page-aligned start; advice only, so a failure is harmless.
  const auto page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(range.data()) & ~(page - 1);
  const auto end = reinterpret_cast<uintptr_t>(range.data()) + range.size();
  ::madvise(reinterpret_cast<void*>(start), end - start, MADV_WILLNEED);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace bdsl::models
