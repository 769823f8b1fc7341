// TQ1_0 and TQ2_0 (models/formats/tq.h): mainline llama.cpp's block layouts, byte for byte where
// docs/model-family.md's formulas give the bytes by hand; the round trip; and every bad tensor
// refused naming the tensor, the block and what was found.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "models/formats/i2s.h"
#include "models/formats/tq.h"
#include "models/numerics/half_float.h"

namespace bdsl::models {
namespace {

using tq::TqError;

std::vector<int8_t> random_ternary(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = int8_t(int(rng() % 3) - 1);
  return v;
}

uint16_t stored_d(std::span<const std::byte> data, uint64_t block, uint64_t block_bytes) {
  uint16_t d;
  std::memcpy(&d, data.data() + (block + 1) * block_bytes - 2, 2);
  return d;
}

TEST(Tq, EncodeThenDecodeGivesTheValuesAndTheF16Scale) {
  for (GgmlType type : {GgmlType::TQ2_0, GgmlType::TQ1_0}) {
    auto values = random_ternary(1024, 3);
    std::fill(values.begin() + 512, values.begin() + 768, int8_t{0});  // block 2: all zero
    const float scale = 0.0371f;
    const auto bytes = tq::encode(type, values, scale);
    const uint64_t bb = type == GgmlType::TQ2_0 ? 66 : 54;
    ASSERT_EQ(bytes.size(), 4 * bb);
    EXPECT_EQ(stored_d(bytes, 0, bb), numerics::f32_to_f16(scale));
    EXPECT_EQ(stored_d(bytes, 2, bb), 0) << "an all-zero block stores d = 0, as the reference quantizer does";
    const auto decoded = tq::decode(type, bytes, values.size(), "w");
    EXPECT_EQ(decoded.ternary, values) << ggml_type_name(type);
    EXPECT_EQ(decoded.scale, numerics::f16_to_f32(numerics::f32_to_f16(scale)));
  }
}

// The fast conversion gives the bytes i2s::pack writes for the decoded values, and checks as decode does.
TEST(Tq, ToI2sIsPackOfTheDecodedValues) {
  for (GgmlType type : {GgmlType::TQ2_0, GgmlType::TQ1_0}) {
    auto values = random_ternary(2048, 9);
    std::fill(values.begin() + 256, values.begin() + 512, int8_t{0});
    const auto bytes = tq::encode(type, values, 0.125f);
    const auto decoded = tq::decode(type, bytes, values.size(), "w");
    EXPECT_EQ(tq::to_i2s(type, bytes, values.size(), "w"), i2s::pack(decoded.ternary, decoded.scale)) << ggml_type_name(type);
    EXPECT_NO_THROW(tq::check(type, bytes, values.size(), "w"));
  }
  auto bytes = tq::encode(GgmlType::TQ2_0, random_ternary(512, 2), 1.0f);
  bytes[66 + 40] = std::byte{0x30};  // block 1, byte 40 (half 1, byte 8), field 2: element 256 + 128 + 64 + 8
  try {
    tq::check(GgmlType::TQ2_0, bytes, 512, "blk.0.attn_q.weight");
    ADD_FAILURE() << "no error";
  } catch (const TqError& e) {
    EXPECT_NE(std::string(e.what()).find("block 1 (byte 66 of its data) holds the field 3 for element 456"), std::string::npos)
        << e.what();
  }
}

// The bytes by hand from the layouts: TQ2_0 byte b holds elements (b / 32) 128 + 32 n + b % 32 at
// bits 2n; a TQ1_0 byte is ceil(v 256 / 243) of the base-3 number v of its trits, n = 0 first.
TEST(Tq, BytesAreMainlinesLayout) {
  std::vector<int8_t> v(256, 0);
  v[129] = 1;  // (b / 32) = 1, n = 0, b % 32 = 1: byte 33, bits 0-1, trit 2
  const auto tq2 = tq::encode(GgmlType::TQ2_0, v, 1.0f);
  for (int b = 0; b < 64; ++b) EXPECT_EQ(uint8_t(tq2[b]), b == 33 ? 0x56 : 0x55) << "byte " << b;
  EXPECT_EQ(stored_d(tq2, 0, 66), 0x3C00);  // 1.0 in F16

  std::vector<int8_t> w(256, 0);
  w[32] = 1;    // qs[0], n = 1: trits 1 2 1 1 1, v = 148, byte ceil(148 * 256 / 243) = 156
  w[249] = -1;  // qh[1] holds 241, 245, 249, 253: trits 1 1 0 1 (and 0), v = 111, byte 117
  const auto tq1 = tq::encode(GgmlType::TQ1_0, w, 1.0f);
  EXPECT_EQ(uint8_t(tq1[0]), 156);
  for (int m = 1; m < 48; ++m) EXPECT_EQ(uint8_t(tq1[m]), 0x80) << "byte " << m << ": five zeros, v = 121";
  EXPECT_EQ(uint8_t(tq1[48]), 0x7F);  // four zeros and the fifth zero trit: v = 120
  EXPECT_EQ(uint8_t(tq1[49]), 117);
  EXPECT_EQ(tq::decode(GgmlType::TQ1_0, tq1, 256, "w").ternary, w);
  // Every byte decodes: the largest one is five trits of 2 (v = 242, byte 255).
  std::vector<std::byte> all_max(tq1.begin(), tq1.end());
  for (int m = 0; m < 48; ++m) all_max[m] = std::byte{255};
  const auto d = tq::decode(GgmlType::TQ1_0, all_max, 256, "w");
  for (int e = 0; e < 240; ++e) EXPECT_EQ(d.ternary[e], 1) << "element " << e;
}

TEST(Tq, BadTensorsAreRefusedNamingTheProblem) {
  auto expect_error = [](GgmlType type, std::span<const std::byte> bytes, uint64_t n, const std::string& part) {
    try {
      tq::decode(type, bytes, n, "blk.3.ffn_up.weight");
      ADD_FAILURE() << "no error; expected: " << part;
    } catch (const TqError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("blk.3.ffn_up.weight"), std::string::npos) << e.what();
    }
  };
  auto values = random_ternary(768, 5);
  auto tq2 = tq::encode(GgmlType::TQ2_0, values, 0.5f);
  auto three = tq2;
  three[66 + 5] = std::byte{0x03};  // block 1, byte 5, n = 0: element 256 + 5
  expect_error(GgmlType::TQ2_0, three, 768, "TQ2_0 block 1 (byte 66 of its data) holds the field 3 for element 261");
  auto other_scale = tq2;
  const uint16_t d = numerics::f32_to_f16(0.25f);
  std::memcpy(other_scale.data() + 3 * 66 - 2, &d, 2);
  expect_error(GgmlType::TQ2_0, other_scale, 768, "blocks 0 and 2 have different scales (0.5 and 0.25)");
  expect_error(GgmlType::TQ2_0, std::span(tq2).first(100), 768, "holds 100 bytes, expected 198");
  expect_error(GgmlType::TQ1_0, std::span(tq2).first(54), 200, "200 elements is not a positive multiple of 256");
  EXPECT_THROW(tq::encode(GgmlType::TQ2_0, std::vector<int8_t>(256, 2), 1.0f), TqError);
  EXPECT_THROW(tq::encode(GgmlType::I2_S, values, 1.0f), TqError);
}

}  // namespace
}  // namespace bdsl::models
