// NumPy .npy files (format 1.0; 2.0 is also read): little-endian float32 ('<f4') or int32
// ('<i4') arrays in C order. The exchange format of golden data, --dump-logits and --dump-layers,
// readable with a plain `numpy.load`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace bdsl::golden {

struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class T>
struct NpyArray {
  std::vector<uint64_t> shape;  // outermost first, as numpy prints it
  std::vector<T> data;          // C order
};

// Writes `data` with the given shape (its product must equal data.size()). Throws NpyError
// naming the path on an I/O error or a shape mismatch.
void write_npy(const std::filesystem::path& path, std::span<const float> data, std::vector<uint64_t> shape);
void write_npy(const std::filesystem::path& path, std::span<const int32_t> data, std::vector<uint64_t> shape);

// In-memory forms of the same (the file's exact bytes).
std::vector<std::byte> encode_npy(std::span<const float> data, std::vector<uint64_t> shape);
std::vector<std::byte> encode_npy(std::span<const int32_t> data, std::vector<uint64_t> shape);

// Reads an array of exactly that element type; NpyError naming the file and what was found for
// anything else (another dtype, Fortran order, big-endian, truncated data, a malformed header).
NpyArray<float> read_npy_f32(const std::filesystem::path& path);
NpyArray<int32_t> read_npy_i32(const std::filesystem::path& path);
NpyArray<float> decode_npy_f32(std::span<const std::byte> bytes, const std::string& name = "<memory>");
NpyArray<int32_t> decode_npy_i32(std::span<const std::byte> bytes, const std::string& name = "<memory>");

}  // namespace bdsl::golden
