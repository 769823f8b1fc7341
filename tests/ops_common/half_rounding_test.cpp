// round_to_half (ops/common/half_rounding.h), the F16 rounding of q before q.K, bit for bit the
// host's numerics::f32_to_f16 round trip: ties to even, F16 subnormals, overflow to inf, signs.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "device_test.h"
#include "models/numerics/half_float.h"
#include "ops/common/half_rounding.h"

namespace bdsl::test {
namespace {

using namespace bdsl::dsl;

class HalfRounding : public DeviceTest {};

TEST_F(HalfRounding, IsTheHostsF16RoundTripBitForBit) {
  std::vector<float> in = {0.0f, -0.0f, 1.0f, -1.0f, 0.1f, 3.14159265f, -2.7182818f, 65504.0f, 65519.0f, 65520.0f,
                           -65520.0f, 1e6f, INFINITY, -INFINITY, 6.1035156e-05f /* 2^-14 */, 6.0e-05f, 1e-7f, -3e-8f,
                           5.9604645e-08f /* 2^-24 */, 2.98e-08f, 1e-30f};
  // Exact ties between two F16 values (odd and even last bits), and their neighbours.
  for (float base : {1.0f, 1.5f, 1024.0f, 0.0009765625f})
    for (int k = 0; k < 4; ++k) {
      const float tie = base + (2 * k + 1) * base * std::ldexp(1.0f, -11);
      in.push_back(tie);
      in.push_back(std::nextafter(tie, 0.0f));
      in.push_back(std::nextafter(tie, 1e9f));
    }
  uint32_t state = 12345;  // and many ordinary values of every magnitude q takes
  for (int i = 0; i < 4000; ++i) {
    state = state * 1664525u + 1013904223u;
    in.push_back(std::ldexp(float(state >> 8) / 16777216.0f - 0.5f, int(state % 40) - 30));
  }
  const auto got = run_map<f32, f32>("round_to_half", std::function<Expr<f32>(Expr<f32>)>([](Expr<f32> x) {
                                       return ops::round_to_half(x);
                                     }), in);
  ASSERT_EQ(got.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = numerics::f16_to_f32(numerics::f32_to_f16(in[i]));
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << "input " << in[i] << " (" << i << ")";
  }
}

}  // namespace
}  // namespace bdsl::test
