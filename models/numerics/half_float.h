// IEEE 754 binary16 <-> binary32, written out so the reference needs no compiler extension
// (_Float16) and gives the same bits everywhere.
#pragma once
#include <cstdint>
#include <span>

namespace bdsl::numerics {

float f16_to_f32(uint16_t h);
// out[i] = f16_to_f32(in[i]) for every i < in.size() (out holds at least as many).
void f16_to_f32(std::span<const uint16_t> in, std::span<float> out);
// Round to nearest, ties to even; overflow gives infinity, NaN stays NaN.
uint16_t f32_to_f16(float f);

}  // namespace bdsl::numerics
