// I2_S codec: the byte layout pinned by a hand-computed example, round trips, quantization as
// bitnet.cpp's quantize_i2_s does it, and rejection of code 3.
#include <gtest/gtest.h>

#include <random>

#include "models/formats/i2s.h"

namespace bdsl::models {
namespace {

// One block of 128: elements 0..31 = +1, 32..63 = 0, 64..95 = -1, 96..127 = +1, except
// element 0 = -1, element 33 = +1 and element 127 = 0. Codes -1 -> 0, 0 -> 1, +1 -> 2; byte i
// holds elements i, 32+i, 64+i, 96+i in bits 7:6, 5:4, 3:2, 1:0:
//   byte 0:  codes 0,1,0,2 -> 00 01 00 10 = 0x12
//   byte 1:  codes 2,2,0,2 -> 10 10 00 10 = 0xA2
//   byte 31: codes 2,1,0,1 -> 10 01 00 01 = 0x91
//   others:  codes 2,1,0,2 -> 10 01 00 10 = 0x92
// then the scale 0.5f (0x3F000000, little-endian) at byte n/4 = 32, zero padded to 64 bytes.
std::vector<int8_t> example_values() {
  std::vector<int8_t> v(128);
  for (int j = 0; j < 128; ++j) v[j] = j < 32 ? 1 : j < 64 ? 0 : j < 96 ? -1 : 1;
  v[0] = -1;
  v[33] = 1;
  v[127] = 0;
  return v;
}

const uint8_t kExampleBytes[64] = {
    0x12, 0xA2, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92,
    0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x92, 0x91,
    0x00, 0x00, 0x00, 0x3F, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

std::vector<std::byte> example_bytes() {
  std::vector<std::byte> out;
  for (uint8_t b : kExampleBytes) out.push_back(std::byte{b});
  return out;
}

TEST(I2s, PackMatchesTheHandComputedLayout) {
  EXPECT_EQ(i2s::pack(example_values(), 0.5f), example_bytes());
}

TEST(I2s, UnpackOfTheHandComputedBytesGivesTheValuesAndScale) {
  EXPECT_EQ(i2s::unpack(example_bytes(), 128), example_values());
  EXPECT_EQ(i2s::scale(example_bytes(), 128), 0.5f);
}

TEST(I2s, SecondBlockStartsAtByte32AndScaleFollowsAllCodes) {
  std::vector<int8_t> v(256, 0);
  v[128] = 1;   // block 1, element 0: byte 32 bits 7:6 = 2
  v[255] = -1;  // block 1, element 127: byte 63 bits 1:0 = 0
  const auto packed = i2s::pack(v, 2.0f);
  ASSERT_EQ(packed.size(), 256u / 4 + 32);
  EXPECT_EQ(packed[31], std::byte{0x55});
  EXPECT_EQ(packed[32], std::byte{0x95});
  EXPECT_EQ(packed[63], std::byte{0x54});
  EXPECT_EQ(packed[64 + 3], std::byte{0x40});  // 2.0f = 0x40000000 at byte n/4 = 64
}

TEST(I2s, RandomRoundTrips) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-1, 1);
  for (uint64_t n : {128u, 256u, 1280u, 128u * 33}) {
    std::vector<int8_t> v(n);
    for (auto& x : v) x = static_cast<int8_t>(d(rng));
    const auto packed = i2s::pack(v, 0.25f);
    EXPECT_EQ(packed.size(), i2s::packed_bytes(n));
    EXPECT_EQ(i2s::unpack(packed, n), v);
    EXPECT_EQ(i2s::scale(packed, n), 0.25f);
    EXPECT_NO_THROW(i2s::validate(packed, n, "t"));
  }
}

TEST(I2s, UnpackRowMatchesTheSliceOfTheWhole) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> d(-1, 1);
  const uint64_t rows = 3, cols = 256;
  std::vector<int8_t> v(rows * cols);
  for (auto& x : v) x = static_cast<int8_t>(d(rng));
  const auto packed = i2s::pack(v, 1.0f);
  std::vector<int8_t> row(cols);
  for (uint64_t r = 0; r < rows; ++r) {
    i2s::unpack_row(packed, rows * cols, r, cols, row);
    EXPECT_TRUE(std::equal(row.begin(), row.end(), v.begin() + r * cols)) << "row " << r;
  }
  EXPECT_THROW(i2s::unpack_row(packed, rows * cols, 3, cols, row), i2s::I2sError);
  std::vector<int8_t> odd(100);
  EXPECT_THROW(i2s::unpack_row(packed, rows * cols, 0, 100, odd), i2s::I2sError);
}

// Rows in another order (graph_traits.h's reordered attn_q/attn_k): each row of the result is the
// named row of the input, the scale follows, and bad orders are refused.
TEST(I2s, ReorderRowsMovesWholeRowsAndKeepsTheScale) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> d(-1, 1);
  const uint64_t rows = 4, cols = 256;
  std::vector<int8_t> v(rows * cols);
  for (auto& x : v) x = static_cast<int8_t>(d(rng));
  const auto packed = i2s::pack(v, 0.5f);
  const std::vector<uint32_t> from = {2, 0, 3, 1};
  const auto moved = i2s::reorder_rows(packed, rows, cols, from);
  const auto values = i2s::unpack(moved, rows * cols);
  for (uint64_t r = 0; r < rows; ++r)
    EXPECT_TRUE(std::equal(values.begin() + int64_t(r * cols), values.begin() + int64_t((r + 1) * cols),
                           v.begin() + int64_t(from[r] * cols)))
        << "row " << r;
  EXPECT_EQ(i2s::scale(moved, rows * cols), 0.5f);
  EXPECT_THROW(i2s::reorder_rows(packed, rows, cols, std::vector<uint32_t>{0, 1, 2}), i2s::I2sError);
  EXPECT_THROW(i2s::reorder_rows(packed, rows, cols, std::vector<uint32_t>{0, 1, 2, 4}), i2s::I2sError);
  EXPECT_THROW(i2s::reorder_rows(packed, rows, 200, from), i2s::I2sError);
  EXPECT_THROW(i2s::reorder_rows(std::span(packed).first(packed.size() - 1), rows, cols, from), i2s::I2sError);
}

TEST(I2s, QuantizeUsesSignWithThresholdAndMaxAbsScale) {
  std::vector<float> w(128, 0.0f);
  w[0] = 0.3f;
  w[1] = -0.7f;
  w[2] = 5e-7f;   // below 1e-6: zero
  w[3] = -2e-6f;  // above: its sign
  const auto q = i2s::quantize(w);
  EXPECT_EQ(q.scale, 0.7f);
  EXPECT_EQ(q.ternary[0], 1);
  EXPECT_EQ(q.ternary[1], -1);
  EXPECT_EQ(q.ternary[2], 0);
  EXPECT_EQ(q.ternary[3], -1);
  EXPECT_EQ(q.ternary[4], 0);
}

TEST(I2s, CodeThreeIsRejectedNamingTensorAndByte) {
  auto packed = i2s::pack(std::vector<int8_t>(256, 0), 1.0f);
  packed[37] |= std::byte{0x0C};  // element 64 + 5 of block 1 becomes code 3
  try {
    i2s::validate(packed, 256, "blk.0.attn_q.weight");
    FAIL();
  } catch (const i2s::I2sError& e) {
    EXPECT_STREQ(e.what(), "tensor \"blk.0.attn_q.weight\": invalid I2_S code 3 at byte 37 (0x5d), "
                           "element 197; expected codes 0, 1 or 2");
  }
  EXPECT_THROW(i2s::unpack(packed, 256), i2s::I2sError);
}

TEST(I2s, CountsThatAreNotMultiplesOf128AreRefused) {
  EXPECT_THROW(i2s::packed_bytes(100), i2s::I2sError);
  EXPECT_THROW(i2s::packed_bytes(0), i2s::I2sError);
  EXPECT_THROW(i2s::pack(std::vector<int8_t>(64, 0), 1.0f), i2s::I2sError);
  try {
    i2s::packed_bytes(130);
    FAIL();
  } catch (const i2s::I2sError& e) {
    EXPECT_STREQ(e.what(), "I2_S needs an element count that is a positive multiple of 128, found 130");
  }
}

TEST(I2s, NonTernaryValuesAndWrongSizesAreRefused) {
  std::vector<int8_t> v(128, 0);
  v[5] = 2;
  EXPECT_THROW(i2s::pack(v, 1.0f), i2s::I2sError);
  const auto packed = example_bytes();
  EXPECT_THROW(i2s::unpack(std::span(packed).first(63), 128), i2s::I2sError);
  EXPECT_THROW(i2s::validate(std::span(packed).first(63), 128, "t"), i2s::I2sError);
}

}  // namespace
}  // namespace bdsl::models
