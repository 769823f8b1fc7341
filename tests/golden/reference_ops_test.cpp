#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "golden/reference_ops.h"
#include "golden/splitmix.h"
#include "models/numerics/half_float.h"
#include "models/numerics/rope.h"

namespace bdsl::golden {
namespace {

TEST(QuantizeActivations, RoundsHalfToEven) {
  // absmax 127 makes s exactly 1, so x * s is x and the rounding is visible directly.
  const std::vector<float> x{127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -3.5f, 126.4f};
  std::vector<int8_t> q(x.size());
  EXPECT_EQ(quantize_activations(x, q), 1.0f);
  EXPECT_EQ(q, (std::vector<int8_t>{127, 0, 2, 2, 0, -2, -4, 126}));
}

TEST(QuantizeActivations, ScalesByAbsMax) {
  const std::vector<float> x{0.5f, -1.0f, 0.25f, 0.0f};
  std::vector<int8_t> q(x.size());
  EXPECT_EQ(quantize_activations(x, q), 127.0f);
  EXPECT_EQ(q, (std::vector<int8_t>{64, -127, 32, 0}));  // 63.5 -> 64 (even), 31.75 -> 32
}

TEST(QuantizeActivations, FloorsTinyAbsMaxAt1e5) {
  const std::vector<float> x{1e-7f, -2e-6f};
  std::vector<int8_t> q(x.size());
  const float s = quantize_activations(x, q);
  EXPECT_EQ(s, 127.0f / 1e-5f);
  EXPECT_EQ(q, (std::vector<int8_t>{1, -25}));  // 1.27 -> 1, -25.4 -> -25
  const std::vector<float> zeros(4, 0.0f);
  std::vector<int8_t> qz(4, 9);
  EXPECT_EQ(quantize_activations(zeros, qz), 127.0f / 1e-5f);
  EXPECT_EQ(qz, std::vector<int8_t>(4, 0));
}

TEST(RmsNorm, MatchesHandComputedValues) {
  const std::vector<float> x{1, 2, 3, 4}, w{1, 1, 2, 0.5f};
  std::vector<float> out(4);
  rms_norm(x, w, 0.5f, out);  // mean(x^2) = 7.5, + eps 0.5 = 8: divide by sqrt(8)
  const float r = 1.0f / std::sqrt(8.0f);
  EXPECT_FLOAT_EQ(out[0], 1 * r);
  EXPECT_FLOAT_EQ(out[1], 2 * r);
  EXPECT_FLOAT_EQ(out[2], 6 * r);
  EXPECT_FLOAT_EQ(out[3], 2 * r);
}

TEST(RopeNeox, RotatesSplitHalfPairs) {
  std::vector<float> head{1, 2, 3, 4};
  rope_neox(head, 1, 4, 10000.0f);  // pairs (0,2) by 1 rad, (1,3) by 10000^(-1/2) = 0.01 rad
  EXPECT_NEAR(head[0], -1.98411065f, 1e-6);
  EXPECT_NEAR(head[1], 1.95990067f, 1e-6);
  EXPECT_NEAR(head[2], 2.46237790f, 1e-6);
  EXPECT_NEAR(head[3], 4.01979967f, 1e-6);
}

TEST(RopeNeox, PositionZeroIsIdentityAndPartialRopeKeepsTheRest) {
  std::vector<float> head{1, 2, 3, 4};
  rope_neox(head, 0, 4, 500000.0f);
  EXPECT_EQ(head, (std::vector<float>{1, 2, 3, 4}));
  rope_neox(head, 2, 2, 10000.0f);  // only the pair (0, 1), by 2 rad
  EXPECT_NEAR(head[0], std::cos(2.0f) - 2 * std::sin(2.0f), 1e-6);
  EXPECT_NEAR(head[1], std::sin(2.0f) + 2 * std::cos(2.0f), 1e-6);
  EXPECT_EQ(head[2], 3.0f);
  EXPECT_EQ(head[3], 4.0f);
}

TEST(RopeNeox, UsesTheBaseItIsGiven) {
  std::vector<float> a{0, 1, 0, 0, 1, 0};
  std::vector<float> b = a;
  rope_neox(a, 5, 6, 10000.0f);
  rope_neox(b, 5, 6, 500000.0f);
  EXPECT_NE(a[1], b[1]);
}

// The table the GPU kernels read holds rope_neox's own rotations, bit for bit, at every position.
TEST(RopeNeox, TableHoldsTheRotationsRopeNeoxTurnsBy) {
  for (auto [dim, base] : {std::pair<std::size_t, float>{128, 500000.0f}, {6, 10000.0f}}) {
    const uint32_t positions = 300;
    const auto table = numerics::rope_table(positions, dim, base);
    ASSERT_EQ(table.size(), std::size_t{positions} * dim);
    for (uint32_t pos = 0; pos < positions; pos += 7)
      for (std::size_t i = 0; i < dim / 2; ++i) {
        std::vector<float> head(dim, 0.0f);
        head[i] = 1.0f;  // (1, 0) turned by (c, s) is (c, s)
        rope_neox(head, pos, dim, base);
        ASSERT_EQ(table[(pos * dim / 2 + i) * 2], head[i]) << "pos " << pos << " pair " << i;
        ASSERT_EQ(table[(pos * dim / 2 + i) * 2 + 1], head[i + dim / 2]) << "pos " << pos << " pair " << i;
      }
  }
  EXPECT_THROW(numerics::rope_table(4, 5, 10000.0f), std::invalid_argument);
}

TEST(TernaryMatvec, AccumulatorsAreExactAndEqualTheCodeForm) {
  SplitMix64 rng(3);
  TernaryMatrix w;
  w.rows = 37, w.cols = 640, w.scale = 0.25f;
  for (std::size_t i = 0; i < w.rows * w.cols; ++i) w.values.push_back(static_cast<int8_t>(int(rng.next() % 3) - 1));
  std::vector<float> x(w.cols);
  for (float& v : x) v = 3.0f * rng.symmetric();
  std::vector<float> y(w.rows);
  std::vector<int32_t> acc(w.rows);
  bitlinear(w, x, y, acc);

  std::vector<int8_t> q(w.cols);
  const float s = quantize_activations(x, q);
  for (std::size_t r = 0; r < w.rows; ++r) {
    int64_t naive = 0, code_sum = 0, q_sum = 0;
    for (std::size_t c = 0; c < w.cols; ++c) {
      naive += int64_t(w.values[r * w.cols + c]) * q[c];
      code_sum += int64_t(w.values[r * w.cols + c] + 1) * q[c];  // I2_S code = value + 1
      q_sum += q[c];
    }
    EXPECT_EQ(acc[r], naive);
    EXPECT_EQ(acc[r], code_sum - q_sum);  // docs/format.md: sum code*q - sum q
    EXPECT_EQ(y[r], static_cast<float>(acc[r]) / s * w.scale);
  }
}

TEST(TernaryMatvec, ExtremeInputsStayExact) {
  TernaryMatrix w;
  w.rows = 2, w.cols = 4096, w.scale = 1.0f;
  w.values.assign(w.cols, 1);
  w.values.resize(2 * w.cols, -1);
  std::vector<float> x(w.cols, -1.0f);  // every q = -127
  std::vector<float> y(2);
  std::vector<int32_t> acc(2);
  bitlinear(w, x, y, acc);
  EXPECT_EQ(acc[0], -127 * 4096);
  EXPECT_EQ(acc[1], 127 * 4096);
}

TEST(Attention, SoftmaxOverCachedPositions) {
  MatrixF q(1, 2), k(2, 1), v(2, 1), out;
  q.data = {1.0f, 0.0f};  // two query heads of size 1 sharing one KV head (GQA)
  k.data = {0.0f, 1.0f};
  v.data = {10.0f, 20.0f};
  attention(q, k, v, 1, {2, 1, 1}, out);
  EXPECT_NEAR(out.at(0, 0), 17.3105858f, 1e-5);  // weights 1/(1+e), e/(1+e)
  EXPECT_NEAR(out.at(0, 1), 15.0f, 1e-5);        // zero query: uniform weights
  attention(q, k, v, 0, {2, 1, 1}, out);        // position 0 sees only itself
  EXPECT_EQ(out.at(0, 0), 10.0f);
}

TEST(Relu2Gate, SquaresThePositivePart) {
  const std::vector<float> gate{-1.0f, 0.0f, 2.0f}, up{5.0f, 5.0f, 0.5f};
  std::vector<float> out(3);
  relu2_gate(gate, up, out);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f, 2.0f}));
}

// Adjacent-pair RoPE is NeoX's on the permutation llama.cpp's converter applies to Q and K
// (element 2i <-> i, 2i + 1 <-> i + half): the same rotations, the same bits.
TEST(RopeAdjacent, IsNeoxOnTheConvertersPermutation) {
  const std::size_t n = 8, half = n / 2;
  std::vector<float> adjacent{0.3f, -1.2f, 2.5f, 0.7f, -0.4f, 1.9f, 1.1f, -2.2f}, split(n);
  for (std::size_t i = 0; i < half; ++i) split[i] = adjacent[2 * i], split[i + half] = adjacent[2 * i + 1];
  rope_adjacent(adjacent, 7, n, 10000.0f);
  rope_neox(split, 7, n, 10000.0f);
  for (std::size_t i = 0; i < half; ++i) {
    EXPECT_EQ(adjacent[2 * i], split[i]) << i;
    EXPECT_EQ(adjacent[2 * i + 1], split[i + half]) << i;
  }
  std::vector<float> pair{1, 2, 3, 4};
  rope_adjacent(pair, 1, 2, 10000.0f);  // only the pair (0, 1), by 1 rad
  EXPECT_NEAR(pair[0], std::cos(1.0f) - 2 * std::sin(1.0f), 1e-6);
  EXPECT_NEAR(pair[1], std::sin(1.0f) + 2 * std::cos(1.0f), 1e-6);
  EXPECT_EQ(pair[2], 3.0f);
  EXPECT_THROW(rope_adjacent(pair, 1, 3, 10000.0f), std::invalid_argument);
}

TEST(SiluGate, IsGateOverOnePlusExpOfMinusGateTimesUp) {
  const std::vector<float> gate{-20.0f, 0.0f, 1.0f, 20.0f}, up{3.0f, 3.0f, 2.0f, 0.5f};
  std::vector<float> out(4);
  silu_gate(gate, up, out);
  EXPECT_NEAR(out[0], -20.0f / (1.0f + std::exp(20.0f)) * 3.0f, 1e-12);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_NEAR(out[2], 1.46211716f, 1e-6);  // 2 / (1 + e^-1)
  EXPECT_NEAR(out[3], 10.0f, 1e-5);
}

TEST(HalfFloat, RoundTripsAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x7C00; ++h) EXPECT_EQ(numerics::f32_to_f16(numerics::f16_to_f32(static_cast<uint16_t>(h))), h);
  EXPECT_EQ(numerics::f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(numerics::f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(numerics::f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(numerics::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even (down)
  EXPECT_EQ(numerics::f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(numerics::f32_to_f16(70000.0f), 0x7C00);
}

}  // namespace
}  // namespace bdsl::golden
