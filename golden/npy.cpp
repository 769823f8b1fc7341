#include "golden/npy.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>

namespace bdsl::golden {

namespace {

static_assert(std::endian::native == std::endian::little, "npy files are written little-endian as in memory");

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";  // a Python 1-tuple
  return s + ")";
}

// The product of the dimensions; a product past 2^64 is refused (wrapping would accept a huge
// shape as a small array).
uint64_t element_count(const std::vector<uint64_t>& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d != 0 && n > UINT64_MAX / d) throw NpyError("npy: shape " + shape_text(shape) + " overflows 64 bits");
    n *= d;
  }
  return n;
}

// Header padded with spaces and ended by '\n' so that the data starts at a multiple of 64, as
// numpy itself writes it.
std::vector<std::byte> encode(std::string_view descr, const void* data, std::size_t element_size,
                              std::size_t count, const std::vector<uint64_t>& shape) {
  if (element_count(shape) != count) {
    throw NpyError("npy: shape " + shape_text(shape) + " does not hold " + std::to_string(count) + " elements");
  }
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " +
                       shape_text(shape) + ", }";
  const std::size_t unpadded = kMagicSize + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::vector<std::byte> out(kMagicSize + 4 + header.size() + count * element_size);
  std::memcpy(out.data(), kMagic, kMagicSize);
  out[6] = std::byte{1};  // version 1.0
  out[7] = std::byte{0};
  out[8] = std::byte(header.size() & 0xFF);
  out[9] = std::byte(header.size() >> 8);
  std::memcpy(out.data() + 10, header.data(), header.size());
  if (count) std::memcpy(out.data() + 10 + header.size(), data, count * element_size);
  return out;
}

void write_file(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw NpyError(path.string() + ": cannot write");
}

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw NpyError(path.string() + ": cannot open");
  std::vector<char> chars((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  if (!chars.empty()) std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

// Built by appending: GCC 12 warns falsely (-Wrestrict, PR 105329) on "'" + std::string(...).
std::string single_quoted(std::string_view s) {
  std::string out(1, '\'');
  out += s;
  out += '\'';
  return out;
}

// The value text after `'key':` in the header dict, up to the next top-level ',' or '}'.
std::string_view dict_value(std::string_view header, std::string_view key, const std::string& name) {
  const std::string quoted = single_quoted(key);
  std::size_t at = header.find(quoted);
  if (at == std::string_view::npos) throw NpyError(name + ": npy header has no " + quoted);
  at = header.find(':', at + quoted.size());
  if (at == std::string_view::npos) throw NpyError(name + ": npy header: no ':' after " + quoted);
  std::size_t end = at + 1;
  for (int depth = 0; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string_view v = header.substr(at + 1, end - at - 1);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return v;
}

std::vector<uint64_t> parse_shape(std::string_view text, const std::string& name) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    throw NpyError(name + ": npy shape '" + std::string(text) + "' is not a tuple");
  }
  std::vector<uint64_t> shape;
  uint64_t value = 0;
  bool have_digit = false;
  for (char c : text.substr(1, text.size() - 2)) {
    if (c >= '0' && c <= '9') {
      if (value > (UINT64_MAX - 9) / 10) throw NpyError(name + ": npy shape dimension overflows");
      value = value * 10 + uint64_t(c - '0'), have_digit = true;
    } else if (c == ',') {
      if (have_digit) shape.push_back(value);
      value = 0, have_digit = false;
    } else if (c != ' ' && c != 'L') {
      throw NpyError(name + ": npy shape '" + std::string(text) + "' has '" + c + "'");
    }
  }
  if (have_digit) shape.push_back(value);
  return shape;
}

template <class T>
NpyArray<T> decode(std::span<const std::byte> bytes, const std::string& name, std::string_view descr) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    throw NpyError(name + ": not a .npy file (no \\x93NUMPY magic)");
  }
  const auto major = static_cast<unsigned>(bytes[6]);
  const std::size_t len_bytes = major == 1 ? 2 : major == 2 || major == 3 ? 4 : 0;
  if (len_bytes == 0) throw NpyError(name + ": npy version " + std::to_string(major) + " is not supported");
  if (bytes.size() < 8 + len_bytes) throw NpyError(name + ": npy header length truncated");
  uint64_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= uint64_t(bytes[8 + i]) << (8 * i);
  const std::size_t data_start = 8 + len_bytes + header_len;
  if (data_start > bytes.size()) throw NpyError(name + ": npy header runs past the end of the file");
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8 + len_bytes, header_len);

  const std::string_view found_descr = dict_value(header, "descr", name);
  if (found_descr != single_quoted(descr)) {
    throw NpyError(name + ": npy dtype " + std::string(found_descr) + ", expected '" + std::string(descr) + "'");
  }
  if (dict_value(header, "fortran_order", name) != "False") throw NpyError(name + ": npy array is in Fortran order");
  NpyArray<T> out;
  out.shape = parse_shape(dict_value(header, "shape", name), name);
  uint64_t n = 0;
  try {
    n = element_count(out.shape);
  } catch (const NpyError& e) {
    throw NpyError(name + ": " + e.what());
  }
  if (n > (bytes.size() - data_start) / sizeof(T)) {
    throw NpyError(name + ": npy data holds " + std::to_string((bytes.size() - data_start) / sizeof(T)) +
                   " elements, the shape needs " + std::to_string(n));
  }
  out.data.resize(n);
  if (n) std::memcpy(out.data.data(), bytes.data() + data_start, n * sizeof(T));
  return out;
}

}  // namespace

std::vector<std::byte> encode_npy(std::span<const float> data, std::vector<uint64_t> shape) {
  return encode("<f4", data.data(), sizeof(float), data.size(), shape);
}
std::vector<std::byte> encode_npy(std::span<const int32_t> data, std::vector<uint64_t> shape) {
  return encode("<i4", data.data(), sizeof(int32_t), data.size(), shape);
}

void write_npy(const std::filesystem::path& path, std::span<const float> data, std::vector<uint64_t> shape) {
  try {
    write_file(path, encode_npy(data, std::move(shape)));
  } catch (const NpyError& e) {
    throw NpyError(path.string() + ": " + e.what());
  }
}
void write_npy(const std::filesystem::path& path, std::span<const int32_t> data, std::vector<uint64_t> shape) {
  try {
    write_file(path, encode_npy(data, std::move(shape)));
  } catch (const NpyError& e) {
    throw NpyError(path.string() + ": " + e.what());
  }
}

NpyArray<float> decode_npy_f32(std::span<const std::byte> bytes, const std::string& name) {
  return decode<float>(bytes, name, "<f4");
}
NpyArray<int32_t> decode_npy_i32(std::span<const std::byte> bytes, const std::string& name) {
  return decode<int32_t>(bytes, name, "<i4");
}
NpyArray<float> read_npy_f32(const std::filesystem::path& path) {
  return decode_npy_f32(read_file(path), path.string());
}
NpyArray<int32_t> read_npy_i32(const std::filesystem::path& path) {
  return decode_npy_i32(read_file(path), path.string());
}

}  // namespace bdsl::golden
