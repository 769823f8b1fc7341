// I2_S: bitnet.cpp's 2-bit ternary weight format, x86 layout (docs/format.md). A tensor of n elements
// (row-major over the whole tensor, n a multiple of 128) is n/4 bytes of codes followed by one
// float32 scale at byte n/4, padded to n/4 + 32 bytes. Each 128-element block fills 32 bytes:
// element j of the block is byte j % 32, bits (7-2*(j/32)):(6-2*(j/32)), so byte i holds elements
// i, 32+i, 64+i, 96+i in bits 7:6, 5:4, 3:2, 1:0. Codes: 0 -> -1, 1 -> 0, 2 -> +1, 3 invalid.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace bdsl::models::i2s {

inline constexpr uint64_t kBlockElements = 128;
inline constexpr uint64_t kBlockBytes = 32;
inline constexpr uint64_t kScaleBytes = 32;  // the float32 scale plus padding

struct I2sError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// n / 4 + 32; I2sError when n is not a positive multiple of 128.
uint64_t packed_bytes(uint64_t n);

// Packs ternary values (each -1, 0 or +1; I2sError naming the index otherwise) and the scale.
std::vector<std::byte> pack(std::span<const int8_t> ternary, float scale);
void pack_into(std::span<const int8_t> ternary, float scale, std::span<std::byte> out);

// Ternary values and the per-tensor scale, as quantize_i2_s in bitnet.cpp computes them:
// value = 0 when |w| < 1e-6, else sign(w); scale = max |w| over the tensor. (bitnet.cpp's
// converter first rounds weights to {-s, 0, +s} with s = mean |W|, so max |w| is that s.)
struct Quantized {
  std::vector<int8_t> ternary;
  float scale = 0.0f;
};
Quantized quantize(std::span<const float> weights);

// Unpacks all n values to -1/0/+1; I2sError on a wrong buffer size or a code of 3.
std::vector<int8_t> unpack(std::span<const std::byte> packed, uint64_t n);
void unpack_into(std::span<const std::byte> packed, uint64_t n, std::span<int8_t> out);
// Unpacks row `row` of a [rows x row_length] matrix (row_length a multiple of 128) into `out`.
void unpack_row(std::span<const std::byte> packed, uint64_t n, uint64_t row,
                uint64_t row_length, std::span<int8_t> out);
// The float32 scale stored at byte n/4.
float scale(std::span<const std::byte> packed, uint64_t n);
void set_scale(std::span<std::byte> packed, uint64_t n, float scale);

// A [rows x row_length] tensor (row_length a multiple of 128, so a row is whole blocks) with its
// rows in another order: row r of the result is row from[r] of `packed` (from.size() == rows, each
// < rows); the scale and padding follow. I2sError on a wrong size or index.
std::vector<std::byte> reorder_rows(std::span<const std::byte> packed, uint64_t rows, uint64_t row_length,
                                    std::span<const uint32_t> from);

// Checks the size and that no code is 3; the error names the tensor, the byte offset (within the
// tensor data) and the code found.
void validate(std::span<const std::byte> packed, uint64_t n, std::string_view tensor_name);

}  // namespace bdsl::models::i2s
