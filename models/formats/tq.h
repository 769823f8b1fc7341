// TQ1_0 and TQ2_0: mainline llama.cpp's ternary weight types (ggml-common.h, ggml-quants.c; the
// layouts as docs/model-family.md section 4 records them). Blocks of 256 elements along the rows,
// each with one F16 scale d stored after its trits; value = (t - 1) d, trit t in {0, 1, 2}.
//   TQ2_0: 66 bytes, qs[64] then d. Byte b holds 4 trits at bits 2n..2n+1 (n = 0..3) for block
//          elements (b / 32) 128 + 32 n + b % 32; a field of 3 is not a trit.
//   TQ1_0: 54 bytes, qs[48], qh[4], then d. qs[m] (m < 32) holds the 5 trits of elements m + 32 n,
//          qs[32 + m] (m < 16) those of 160 + m + 16 n, qh[j] the 4 of 240 + j + 4 n (n = 0 most
//          significant, a fifth zero trit in qh), as ceil(v 256 / 243) of their base-3 number v.
//          Trit n of a byte x is ((uint8_t)(x 3^n) 3) >> 8: every byte decodes.
// Our kernels take I2_S's one scale per tensor: a TQ tensor is read when every block that holds a
// non-zero weight has the same d (what llama.cpp's converter writes for a BitNet checkpoint,
// whose weights are exactly ternary with one scale per tensor); an all-zero block may hold any d.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "models/formats/ggml_type.h"

namespace bdsl::models::tq {

inline constexpr uint64_t kBlockElements = 256;

struct TqError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool is_tq(GgmlType type);  // TQ1_0 or TQ2_0

struct Decoded {
  std::vector<int8_t> ternary;  // -1, 0, +1
  float scale = 0.0f;           // the blocks' d; 0 when every block is zero
};
// The n values (n a multiple of 256) of a TQ1_0/TQ2_0 tensor. TqError naming `tensor`, the block,
// its byte offset in the tensor's data and what was found, for a wrong size, a TQ2_0 field of 3,
// or blocks with different scales.
Decoded decode(GgmlType type, std::span<const std::byte> data, uint64_t n, std::string_view tensor);

// The tensor in I2_S's layout (models/formats/i2s.h: what the kernels read) with the blocks' one
// scale, after the checks decode() makes, at memory speed: TQ2_0's fields are I2_S's codes in the
// other order within each byte, TQ1_0's trits come from a table. The same errors as decode().
std::vector<std::byte> to_i2s(GgmlType type, std::span<const std::byte> data, uint64_t n, std::string_view tensor);
// Only the checks (a file's validation before anything loads).
void check(GgmlType type, std::span<const std::byte> data, uint64_t n, std::string_view tensor);

// The values (each -1, 0 or +1) as `type` stores them, d = f16(scale) in every block that holds a
// non-zero value and 0 in the others (quantize_row_tq*_0_ref's result for such a tensor).
std::vector<std::byte> encode(GgmlType type, std::span<const int8_t> ternary, float scale);

}  // namespace bdsl::models::tq
