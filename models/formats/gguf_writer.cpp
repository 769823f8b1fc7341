#include "models/formats/gguf_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace bdsl::models {

namespace {

constexpr uint32_t kVersion = 3;

// resize + memcpy rather than insert: GCC 12 reports false -Wstringop-overflow on the latter.
void append_bytes(std::vector<std::byte>& out, const void* p, std::size_t n) {
  if (n == 0) return;
  const std::size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <class T> void append(std::vector<std::byte>& out, T v) { append_bytes(out, &v, sizeof v); }

void append_string(std::vector<std::byte>& out, std::string_view s) {
  append<uint64_t>(out, s.size());
  append_bytes(out, s.data(), s.size());
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

std::vector<std::byte> array_head(GgufValueType element, uint64_t count) {
  std::vector<std::byte> out;
  append<uint32_t>(out, static_cast<uint32_t>(element));
  append<uint64_t>(out, count);
  return out;
}

template <class T> std::vector<std::byte> scalar_bytes(T v) {
  std::vector<std::byte> out;
  append<T>(out, v);
  return out;
}

}  // namespace

// ---- GgufOutValue ----

GgufOutValue::GgufOutValue(GgufValueType type, std::vector<std::byte> payload)
    : type_(type), payload_(std::move(payload)) {}

GgufOutValue GgufOutValue::u8(uint8_t v) { return {GgufValueType::UINT8, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::i8(int8_t v) { return {GgufValueType::INT8, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::u16(uint16_t v) { return {GgufValueType::UINT16, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::i16(int16_t v) { return {GgufValueType::INT16, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::u32(uint32_t v) { return {GgufValueType::UINT32, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::i32(int32_t v) { return {GgufValueType::INT32, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::u64(uint64_t v) { return {GgufValueType::UINT64, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::i64(int64_t v) { return {GgufValueType::INT64, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::f32(float v) { return {GgufValueType::FLOAT32, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::f64(double v) { return {GgufValueType::FLOAT64, scalar_bytes(v)}; }
GgufOutValue GgufOutValue::boolean(bool v) {
  return {GgufValueType::BOOL, scalar_bytes<uint8_t>(v ? 1 : 0)};
}

GgufOutValue GgufOutValue::string(std::string_view v) {
  std::vector<std::byte> out;
  append_string(out, v);
  return {GgufValueType::STRING, std::move(out)};
}

template <class T> GgufOutValue GgufOutValue::array(std::span<const T> values) {
  auto out = array_head(gguf_type_of<T>(), values.size());
  for (const T& v : values) {
    if constexpr (std::is_same_v<T, bool>) append<uint8_t>(out, v ? 1 : 0);
    else append<T>(out, v);
  }
  return {GgufValueType::ARRAY, std::move(out)};
}

GgufOutValue GgufOutValue::string_array(std::span<const std::string> values) {
  auto out = array_head(GgufValueType::STRING, values.size());
  for (const auto& s : values) append_string(out, s);
  return {GgufValueType::ARRAY, std::move(out)};
}

GgufOutValue GgufOutValue::string_array(std::span<const std::string_view> values) {
  auto out = array_head(GgufValueType::STRING, values.size());
  for (auto s : values) append_string(out, s);
  return {GgufValueType::ARRAY, std::move(out)};
}

GgufOutValue GgufOutValue::array_of(std::span<const GgufOutValue> items) {
  // GGUF stores the element type once; each element is its payload without a tag.
  const GgufValueType element = items.empty() ? GgufValueType::UINT8 : items.front().type();
  auto out = array_head(element, items.size());
  for (const auto& item : items) {
    if (item.type() != element)
      throw std::invalid_argument(fmt::format("GGUF array items must share one type: found {} "
                                              "after {}", gguf_value_type_name(item.type()),
                                              gguf_value_type_name(element)));
    append_bytes(out, item.payload().data(), item.payload().size());
  }
  return {GgufValueType::ARRAY, std::move(out)};
}

#define BDSL_INSTANTIATE(T) template GgufOutValue GgufOutValue::array<T>(std::span<const T>);
BDSL_INSTANTIATE(uint8_t) BDSL_INSTANTIATE(int8_t) BDSL_INSTANTIATE(uint16_t)
BDSL_INSTANTIATE(int16_t) BDSL_INSTANTIATE(uint32_t) BDSL_INSTANTIATE(int32_t)
BDSL_INSTANTIATE(uint64_t) BDSL_INSTANTIATE(int64_t) BDSL_INSTANTIATE(float)
BDSL_INSTANTIATE(double) BDSL_INSTANTIATE(bool)
#undef BDSL_INSTANTIATE

// ---- GgufWriter ----

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > UINT32_MAX)
    throw std::invalid_argument(fmt::format("GGUF alignment must be a power of two that fits "
                                            "in uint32, found {}", alignment));
  if (alignment != 32) add_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void GgufWriter::add(std::string key, GgufOutValue value) {
  if (std::find(keys_.begin(), keys_.end(), key) != keys_.end())
    throw std::invalid_argument(fmt::format("duplicate GGUF metadata key \"{}\"", key));
  append_string(metadata_, key);
  append<uint32_t>(metadata_, static_cast<uint32_t>(value.type()));
  append_bytes(metadata_, value.payload().data(), value.payload().size());
  keys_.push_back(std::move(key));
  ++n_kv_;
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims,
                            std::span<const std::byte> data) {
  add_tensor_info(std::move(name), type, std::move(dims), {data.begin(), data.end()}, nullptr);
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims,
                            TensorFill fill) {
  if (!fill) throw std::invalid_argument(fmt::format("tensor \"{}\": empty fill function", name));
  add_tensor_info(std::move(name), type, std::move(dims), {}, std::move(fill));
}

void GgufWriter::add_tensor_info(std::string name, GgmlType type, std::vector<uint64_t> dims,
                                 std::vector<std::byte> data, TensorFill fill) {
  const auto same_name = [&](const Tensor& t) { return t.name == name; };
  if (std::any_of(tensors_.begin(), tensors_.end(), same_name))
    throw std::invalid_argument(fmt::format("duplicate tensor name \"{}\"", name));
  if (dims.empty() || dims.size() > 4)
    throw std::invalid_argument(fmt::format("tensor \"{}\": expected 1 to 4 dims, found {}",
                                            name, dims.size()));
  uint64_t n_bytes = 0;
  try {
    n_bytes = ggml_tensor_bytes(type, dims);
  } catch (const GgmlTypeError& e) {
    throw std::invalid_argument(fmt::format("tensor \"{}\": {}", name, e.what()));
  }
  if (!fill && data.size() != n_bytes)
    throw std::invalid_argument(fmt::format("tensor \"{}\": expected {} bytes of {} data, found {}",
                                            name, n_bytes, ggml_type_name(type), data.size()));
  const uint64_t offset = align_up(data_size_, alignment_);
  data_size_ = offset + n_bytes;
  tensors_.push_back({std::move(name), type, std::move(dims), n_bytes, offset, std::move(data),
                      std::move(fill)});
}

std::vector<std::byte> GgufWriter::encode_header() const {
  std::vector<std::byte> out;
  append_bytes(out, "GGUF", 4);
  append<uint32_t>(out, kVersion);
  append<uint64_t>(out, tensors_.size());
  append<uint64_t>(out, n_kv_);
  append_bytes(out, metadata_.data(), metadata_.size());
  for (const Tensor& t : tensors_) {
    append_string(out, t.name);
    append<uint32_t>(out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) append<uint64_t>(out, d);
    append<uint32_t>(out, static_cast<uint32_t>(t.type));
    append<uint64_t>(out, t.offset);
  }
  return out;
}

uint64_t GgufWriter::data_offset() const { return align_up(encode_header().size(), alignment_); }

uint64_t GgufWriter::total_size() const {
  return data_offset() + align_up(data_size_, alignment_);
}

void GgufWriter::write_to(std::span<std::byte> out) const {
  const auto header = encode_header();
  const uint64_t start = align_up(header.size(), alignment_);
  const uint64_t total = start + align_up(data_size_, alignment_);
  if (out.size() != total)
    throw std::invalid_argument(fmt::format("GGUF output buffer: expected {} bytes, found {}",
                                            total, out.size()));
  std::memcpy(out.data(), header.data(), header.size());
  uint64_t end = header.size();  // zero every gap: the output may hold stale bytes
  for (const Tensor& t : tensors_) {
    std::memset(out.data() + end, 0, start + t.offset - end);
    auto dst = out.subspan(start + t.offset, t.n_bytes);
    if (t.fill) t.fill(dst);
    else std::memcpy(dst.data(), t.data.data(), t.n_bytes);
    end = start + t.offset + t.n_bytes;
  }
  std::memset(out.data() + end, 0, total - end);
}

std::vector<std::byte> GgufWriter::to_bytes() const {
  std::vector<std::byte> out(total_size());
  write_to(out);
  return out;
}

namespace {

[[noreturn]] void io_fail(const std::filesystem::path& path, const char* what) {
  throw std::runtime_error(fmt::format("{}: {}: {}", path.string(), what, std::strerror(errno)));
}

// An output file sized up front and mapped writable; unmapped and closed on every path out.
struct OutputMap {
  int fd = -1;
  void* data = MAP_FAILED;
  uint64_t size = 0;
  OutputMap(const std::filesystem::path& path, uint64_t n) : size(n) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) io_fail(path, "cannot create");
    if (::ftruncate(fd, static_cast<off_t>(n)) != 0) io_fail(path, "cannot resize");
    // Reserve the blocks now: a full disk is then an error here, not a SIGBUS mid-write.
    const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(n));
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
      errno = rc;
      io_fail(path, "cannot reserve space");
    }
    data = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) io_fail(path, "cannot mmap");
  }
  ~OutputMap() {
    if (data != MAP_FAILED) ::munmap(data, size);
    if (fd >= 0) ::close(fd);
  }
  std::span<std::byte> bytes() { return {static_cast<std::byte*>(data), size}; }
};

}  // namespace

void GgufWriter::write(const std::filesystem::path& path) const {
  // Written beside the target and renamed, so a failure never leaves a half-written model.
  const std::filesystem::path tmp = path.string() + ".partial";
  try {
    OutputMap out(tmp, total_size());
    write_to(out.bytes());
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw;
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace bdsl::models
