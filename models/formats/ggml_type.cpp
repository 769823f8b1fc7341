#include "models/formats/ggml_type.h"

#include <array>
#include <limits>

#include <fmt/format.h>

namespace bdsl::models {

namespace {

// Block sizes from ggml's type_traits (QK_K = 256). I2_S counts one element per byte before the
// special n/4 + 32 rule; TL1/TL2 have no shape-derived size (0, 0).
constexpr std::array kTypes = {
    GgmlTypeInfo{GgmlType::F32, "F32", 1, 4},          GgmlTypeInfo{GgmlType::F16, "F16", 1, 2},
    GgmlTypeInfo{GgmlType::Q4_0, "Q4_0", 32, 18},      GgmlTypeInfo{GgmlType::Q4_1, "Q4_1", 32, 20},
    GgmlTypeInfo{GgmlType::Q5_0, "Q5_0", 32, 22},      GgmlTypeInfo{GgmlType::Q5_1, "Q5_1", 32, 24},
    GgmlTypeInfo{GgmlType::Q8_0, "Q8_0", 32, 34},      GgmlTypeInfo{GgmlType::Q8_1, "Q8_1", 32, 36},
    GgmlTypeInfo{GgmlType::Q2_K, "Q2_K", 256, 84},     GgmlTypeInfo{GgmlType::Q3_K, "Q3_K", 256, 110},
    GgmlTypeInfo{GgmlType::Q4_K, "Q4_K", 256, 144},    GgmlTypeInfo{GgmlType::Q5_K, "Q5_K", 256, 176},
    GgmlTypeInfo{GgmlType::Q6_K, "Q6_K", 256, 210},    GgmlTypeInfo{GgmlType::Q8_K, "Q8_K", 256, 292},
    GgmlTypeInfo{GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66}, GgmlTypeInfo{GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    GgmlTypeInfo{GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98}, GgmlTypeInfo{GgmlType::IQ1_S, "IQ1_S", 256, 50},
    GgmlTypeInfo{GgmlType::IQ4_NL, "IQ4_NL", 32, 18},  GgmlTypeInfo{GgmlType::IQ3_S, "IQ3_S", 256, 110},
    GgmlTypeInfo{GgmlType::IQ2_S, "IQ2_S", 256, 82},   GgmlTypeInfo{GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    GgmlTypeInfo{GgmlType::I8, "I8", 1, 1},            GgmlTypeInfo{GgmlType::I16, "I16", 1, 2},
    GgmlTypeInfo{GgmlType::I32, "I32", 1, 4},          GgmlTypeInfo{GgmlType::I64, "I64", 1, 8},
    GgmlTypeInfo{GgmlType::F64, "F64", 1, 8},          GgmlTypeInfo{GgmlType::IQ1_M, "IQ1_M", 256, 56},
    GgmlTypeInfo{GgmlType::BF16, "BF16", 1, 2},        GgmlTypeInfo{GgmlType::TQ1_0, "TQ1_0", 256, 54},
    GgmlTypeInfo{GgmlType::TQ2_0, "TQ2_0", 256, 66},   GgmlTypeInfo{GgmlType::I2_S, "I2_S", 1, 1},
    GgmlTypeInfo{GgmlType::I8_S, "I8_S", 1, 1},        GgmlTypeInfo{GgmlType::TL1, "TL1", 0, 0},
    GgmlTypeInfo{GgmlType::TL2, "TL2", 0, 0},
};

constexpr uint64_t kI2sBlock = 128;       // docs/format.md: x86 blocks of 128 elements
constexpr uint64_t kI2sScaleBytes = 32;   // the float32 scale, padded

}  // namespace

const GgmlTypeInfo* find_ggml_type(uint32_t id) noexcept {
  for (const auto& info : kTypes)
    if (static_cast<uint32_t>(info.type) == id) return &info;
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(uint32_t id) {
  if (const auto* info = find_ggml_type(id)) return *info;
  throw GgmlTypeError(fmt::format("unknown ggml type id {}", id));
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  return ggml_type_info(static_cast<uint32_t>(type));
}

std::string_view ggml_type_name(GgmlType type) {
  if (const auto* info = find_ggml_type(static_cast<uint32_t>(type))) return info->name;
  return "unknown";
}

uint64_t ggml_element_count(std::span<const uint64_t> dims) {
  uint64_t n = 1;
  for (uint64_t d : dims) {
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / d)
      throw GgmlTypeError("element count overflows 64 bits");
    n *= d;
  }
  return n;
}

uint64_t ggml_tensor_bytes(GgmlType type, std::span<const uint64_t> dims) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  const uint64_t n = ggml_element_count(dims);
  if (type == GgmlType::I2_S) {
    if (n == 0 || n % kI2sBlock != 0)
      throw GgmlTypeError(fmt::format("I2_S needs an element count that is a positive multiple "
                                      "of {}, found {}", kI2sBlock, n));
    return n / 4 + kI2sScaleBytes;
  }
  if (info.block_elements == 0)
    throw GgmlTypeError(fmt::format("the size of a {} tensor depends on bitnet.cpp's kernel "
                                    "tiling and cannot be computed from its shape", info.name));
  const uint64_t row = dims.empty() ? 1 : dims[0];
  if (row % info.block_elements != 0)
    throw GgmlTypeError(fmt::format("{} needs ne0 to be a multiple of its block size {}, found {}",
                                    info.name, info.block_elements, row));
  const uint64_t blocks = n / info.block_elements;
  if (blocks > std::numeric_limits<uint64_t>::max() / info.block_bytes)
    throw GgmlTypeError("tensor byte size overflows 64 bits");
  return blocks * info.block_bytes;
}

}  // namespace bdsl::models
