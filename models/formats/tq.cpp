#include "models/formats/tq.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>

#include "models/formats/i2s.h"
#include "models/numerics/half_float.h"

namespace bdsl::models::tq {
namespace {

constexpr uint64_t kTq2Bytes = 66, kTq1Bytes = 54;

uint64_t block_bytes(GgmlType type) { return type == GgmlType::TQ2_0 ? kTq2Bytes : kTq1Bytes; }

// Trit n (0 most significant) of a TQ1_0 byte.
int trit(uint8_t x, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t q = uint8_t(x * kPow3[n]);
  return (q * 3) >> 8;
}

// A TQ1_0 byte of trits t[0..count-1] (count 5, or 4 and a fifth zero trit).
uint8_t pack_trits(const int* t, int count) {
  int v = 0;
  for (int i = 0; i < 5; ++i) v = v * 3 + (i < count ? t[i] : 0);
  return uint8_t((v * 256 + 242) / 243);
}

// TQ2_0 byte -> I2_S byte: the four 2-bit fields in the other order (TQ2_0 holds element 32 n of
// a 128-element half at bits 2n, I2_S at bits 6 - 2n; both code a value v as v + 1).
struct Tables {
  uint8_t reversed[256];
  uint8_t trits[256][5];  // a TQ1_0 byte's trits, n = 0 first
  Tables() {
    for (int x = 0; x < 256; ++x) {
      reversed[x] = uint8_t(((x & 3) << 6) | ((x >> 2 & 3) << 4) | ((x >> 4 & 3) << 2) | (x >> 6 & 3));
      for (int n = 0; n < 5; ++n) trits[x][n] = uint8_t(trit(uint8_t(x), n));
    }
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

void check_shape(GgmlType type, std::span<const std::byte> data, uint64_t n, std::string_view tensor) {
  if (!is_tq(type)) throw TqError(fmt::format("tensor \"{}\": {} is not a TQ type", tensor, ggml_type_name(type)));
  const uint64_t bb = block_bytes(type);
  if (n == 0 || n % kBlockElements != 0)
    throw TqError(fmt::format("tensor \"{}\": {} elements is not a positive multiple of {} ({} blocks)", tensor, n,
                              kBlockElements, ggml_type_name(type)));
  const uint64_t blocks = n / kBlockElements;
  if (data.size() != blocks * bb)
    throw TqError(fmt::format("tensor \"{}\": {} holds {} bytes, expected {} ({} blocks of {})", tensor, ggml_type_name(type),
                              data.size(), blocks * bb, blocks, bb));
}

// The checks of decode() block by block and, with `out` (n / 4 bytes), each block's codes in
// I2_S's layout. Returns the scale.
// The shape must have passed check_shape.
float convert(GgmlType type, std::span<const std::byte> data, uint64_t n, std::string_view tensor, uint8_t* out) {
  const auto name = ggml_type_name(type);
  const Tables& tb = tables();
  const uint64_t bb = block_bytes(type), blocks = n / kBlockElements;
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());
  uint16_t d_bits = 0;
  uint64_t d_block = 0;
  bool have_d = false;
  uint8_t t[kBlockElements];
  for (uint64_t blk = 0; blk < blocks; ++blk) {
    const uint8_t* block = bytes + blk * bb;
    bool nonzero = false;
    if (type == GgmlType::TQ2_0) {
      for (int b = 0; b < 64; ++b) {
        const uint8_t x = block[b];
        if (const int three = x & (x >> 1) & 0x55) {
          const int field = std::countr_zero(unsigned(three)) / 2;
          throw TqError(fmt::format("tensor \"{}\": {} block {} (byte {} of its data) holds the field 3 for element {}, not a trit",
                                    tensor, name, blk, blk * bb, blk * kBlockElements + uint64_t((b / 32) * 128 + field * 32 + b % 32)));
        }
        nonzero |= x != 0x55;
        if (out) out[blk * 64 + b] = tb.reversed[x];  // half b / 32 is I2_S block 2 blk + b / 32, byte b % 32
      }
    } else {
      for (int m = 0; m < 32; ++m)
        for (int k = 0; k < 5; ++k) t[m + 32 * k] = tb.trits[block[m]][k];
      for (int m = 0; m < 16; ++m)
        for (int k = 0; k < 5; ++k) t[160 + m + 16 * k] = tb.trits[block[32 + m]][k];
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 4; ++k) t[240 + j + 4 * k] = tb.trits[block[48 + j]][k];
      for (uint64_t e = 0; e < kBlockElements; ++e) nonzero |= t[e] != 1;
      if (out)
        for (int h = 0; h < 2; ++h)
          for (int i = 0; i < 32; ++i) {
            const uint8_t* u = t + h * 128 + i;
            out[blk * 64 + h * 32 + i] = uint8_t(u[0] << 6 | u[32] << 4 | u[64] << 2 | u[96]);
          }
    }
    if (!nonzero) continue;
    uint16_t d;
    std::memcpy(&d, block + bb - 2, 2);
    if (!have_d) {
      have_d = true, d_bits = d, d_block = blk;
    } else if (d != d_bits) {
      throw TqError(fmt::format("tensor \"{}\": {} blocks {} and {} have different scales ({} and {}); bitnet-dsl takes one "
                                "scale per tensor (a BitNet checkpoint converted by llama.cpp has one)",
                                tensor, name, d_block, blk, numerics::f16_to_f32(d_bits), numerics::f16_to_f32(d)));
    }
  }
  return have_d ? numerics::f16_to_f32(d_bits) : 0.0f;
}

}  // namespace

std::vector<std::byte> to_i2s(GgmlType type, std::span<const std::byte> data, uint64_t n, std::string_view tensor) {
  check_shape(type, data, n, tensor);
  std::vector<std::byte> out(i2s::packed_bytes(n));  // the codes, then the f32 scale at n / 4 and zero padding
  i2s::set_scale(out, n, convert(type, data, n, tensor, reinterpret_cast<uint8_t*>(out.data())));
  return out;
}

void check(GgmlType type, std::span<const std::byte> data, uint64_t n, std::string_view tensor) {
  check_shape(type, data, n, tensor);
  convert(type, data, n, tensor, nullptr);
}

bool is_tq(GgmlType type) { return type == GgmlType::TQ1_0 || type == GgmlType::TQ2_0; }

Decoded decode(GgmlType type, std::span<const std::byte> data, uint64_t n, std::string_view tensor) {
  // Through I2_S's layout: the one conversion (and its checks) the loader uses too.
  const auto packed = to_i2s(type, data, n, tensor);
  return {i2s::unpack(packed, n), i2s::scale(packed, n)};
}

std::vector<std::byte> encode(GgmlType type, std::span<const int8_t> ternary, float scale) {
  if (!is_tq(type)) throw TqError(fmt::format("{} is not a TQ type", ggml_type_name(type)));
  if (ternary.empty() || ternary.size() % kBlockElements != 0)
    throw TqError(fmt::format("{} values is not a positive multiple of {}", ternary.size(), kBlockElements));
  const uint64_t bb = block_bytes(type), blocks = ternary.size() / kBlockElements;
  std::vector<std::byte> out(blocks * bb);
  const uint16_t d = numerics::f32_to_f16(scale);
  for (uint64_t blk = 0; blk < blocks; ++blk) {
    const int8_t* v = ternary.data() + blk * kBlockElements;
    auto* block = reinterpret_cast<uint8_t*>(out.data() + blk * bb);
    int t[kBlockElements];
    bool nonzero = false;
    for (uint64_t e = 0; e < kBlockElements; ++e) {
      if (v[e] < -1 || v[e] > 1) throw TqError(fmt::format("value {} at index {} is not ternary", int(v[e]), blk * kBlockElements + e));
      t[e] = v[e] + 1;
      nonzero |= v[e] != 0;
    }
    if (type == GgmlType::TQ2_0) {
      for (int b = 0; b < 64; ++b) {
        uint8_t x = 0;
        for (int n = 0; n < 4; ++n) x |= uint8_t(t[(b / 32) * 128 + n * 32 + b % 32] << (2 * n));
        block[b] = x;
      }
    } else {
      int g[5];
      for (int m = 0; m < 32; ++m) {
        for (int n = 0; n < 5; ++n) g[n] = t[m + 32 * n];
        block[m] = pack_trits(g, 5);
      }
      for (int m = 0; m < 16; ++m) {
        for (int n = 0; n < 5; ++n) g[n] = t[160 + m + 16 * n];
        block[32 + m] = pack_trits(g, 5);
      }
      for (int j = 0; j < 4; ++j) {
        for (int n = 0; n < 4; ++n) g[n] = t[240 + j + 4 * n];
        block[48 + j] = pack_trits(g, 4);
      }
    }
    const uint16_t block_d = nonzero ? d : 0;
    std::memcpy(block + bb - 2, &block_d, 2);
  }
  return out;
}

}  // namespace bdsl::models::tq
