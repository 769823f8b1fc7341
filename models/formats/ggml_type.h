// The ggml tensor type table: ids as stored in GGUF files, names, block sizes, and checked
// tensor byte sizes. Ids follow bitnet.cpp's ggml (I2_S = 36 ... TL2 = 39, see docs/format.md), which
// differs from mainline ggml above 35.
#pragma once
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace bdsl::models {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, I2_S = 36, I8_S = 37, TL1 = 38, TL2 = 39,
};

// One row of the table. `block_elements`/`block_bytes` are 0 for types whose size on disk
// cannot be computed from the shape alone (TL1/TL2 depend on bitnet.cpp's kernel tiling).
// I2_S is special: one element per "block" of 2 bits, plus one 32-byte scale per tensor.
struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // as ggml spells it, e.g. "F32", "Q8_0", "I2_S"
  uint64_t block_elements;
  uint64_t block_bytes;
};

// Thrown for an unknown type id, a shape that is not a whole number of blocks, or an overflow.
struct GgmlTypeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// nullptr for an id not in the table (never throws): the GGUF reader adds file context itself.
const GgmlTypeInfo* find_ggml_type(uint32_t id) noexcept;
// Throws GgmlTypeError("unknown ggml type id N") for an id not in the table.
const GgmlTypeInfo& ggml_type_info(uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType type);
std::string_view ggml_type_name(GgmlType type);  // "type#N" for an unknown id

// Product of the dims, or GgmlTypeError on overflow of uint64.
uint64_t ggml_element_count(std::span<const uint64_t> dims);

// Bytes a tensor of this type and shape occupies in a GGUF data section: n / block * bytes, with
// dims[0] (the innermost, contiguous dim) a multiple of the block size; I2_S is n / 4 + 32 with n
// a multiple of 128 (docs/format.md). Throws GgmlTypeError naming the problem; never overflows.
uint64_t ggml_tensor_bytes(GgmlType type, std::span<const uint64_t> dims);

}  // namespace bdsl::models
