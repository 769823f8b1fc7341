#include "models/numerics/half_float.h"

#include <array>
#include <bit>
#include <cmath>

namespace bdsl::numerics {

namespace {

float decode_half(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  const uint32_t mantissa = h & 0x3FF;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  // Normal and subnormal values are exact as mantissa * 2^(e-25): no rounding happens here.
  const float magnitude = exponent == 0 ? std::ldexp(float(mantissa), -24)
                                        : std::ldexp(float(mantissa | 0x400), int(exponent) - 25);
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
}

// All 65536 values once: embedding rows are converted on the fly, so this is the hot path.
const std::array<float, 65536>& half_table() {
  static const auto table = [] {
    std::array<float, 65536> t{};
    for (uint32_t h = 0; h < 65536; ++h) t[h] = decode_half(static_cast<uint16_t>(h));
    return t;
  }();
  return table;
}

}  // namespace

float f16_to_f32(uint16_t h) { return half_table()[h]; }

void f16_to_f32(std::span<const uint16_t> in, std::span<float> out) {
  const auto& table = half_table();
  for (size_t i = 0; i < in.size(); ++i) out[i] = table[in[i]];
}

uint16_t f32_to_f16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7FFFFFFF;
  if (abs > 0x7F800000) return static_cast<uint16_t>(sign | 0x7E00);  // NaN
  if (abs >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to >= 65520: inf
  if (abs < 0x38800000) {
    // Subnormal half (or zero): value / 2^-24, rounded to nearest even by the FPU's default mode.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: drop 13 mantissa bits with round to nearest even (a carry may bump the exponent,
  // which is the correct result).
  const uint32_t rebased = abs - (112u << 23);
  const uint32_t round_bit = 1u << 12;
  const uint32_t lsb = (rebased >> 13) & 1u;
  return static_cast<uint16_t>(sign | ((rebased + round_bit - 1 + lsb) >> 13));
}

}  // namespace bdsl::numerics
