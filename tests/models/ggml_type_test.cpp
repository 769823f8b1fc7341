// The ggml type table: ids and block sizes as ggml/bitnet.cpp define them, checked sizes.
#include <gtest/gtest.h>

#include <limits>

#include "models/formats/ggml_type.h"

namespace bdsl::models {
namespace {

uint64_t bytes(GgmlType t, std::vector<uint64_t> dims) { return ggml_tensor_bytes(t, dims); }

TEST(GgmlType, IdsMatchBitnetCpp) {
  EXPECT_EQ(ggml_type_info(0).name, "F32");
  EXPECT_EQ(ggml_type_info(1).name, "F16");
  EXPECT_EQ(ggml_type_info(8).name, "Q8_0");
  EXPECT_EQ(ggml_type_info(30).name, "BF16");
  EXPECT_EQ(ggml_type_info(34).name, "TQ1_0");
  EXPECT_EQ(ggml_type_info(35).name, "TQ2_0");
  EXPECT_EQ(ggml_type_info(36).name, "I2_S");
  EXPECT_EQ(ggml_type_info(37).name, "I8_S");
  EXPECT_EQ(ggml_type_info(38).name, "TL1");
  EXPECT_EQ(ggml_type_info(39).name, "TL2");
}

TEST(GgmlType, UnknownIdsAreRefusedClearly) {
  EXPECT_EQ(find_ggml_type(4), nullptr);  // Q4_2, removed from ggml
  EXPECT_EQ(find_ggml_type(40), nullptr);
  try {
    ggml_type_info(31);
    FAIL();
  } catch (const GgmlTypeError& e) {
    EXPECT_STREQ(e.what(), "unknown ggml type id 31");
  }
}

TEST(GgmlType, TensorBytesFollowBlockSizes) {
  EXPECT_EQ(bytes(GgmlType::F32, {2560}), 10240u);
  EXPECT_EQ(bytes(GgmlType::F16, {2560, 128256}), 2560ull * 128256 * 2);
  EXPECT_EQ(bytes(GgmlType::BF16, {3, 5}), 30u);
  EXPECT_EQ(bytes(GgmlType::Q8_0, {64, 2}), 4u * 34);
  EXPECT_EQ(bytes(GgmlType::TQ1_0, {256}), 54u);
  EXPECT_EQ(bytes(GgmlType::TQ2_0, {512}), 132u);
}

TEST(GgmlType, I2sIsAQuarterPlusThirtyTwo) {
  EXPECT_EQ(bytes(GgmlType::I2_S, {2560, 6912}), 2560ull * 6912 / 4 + 32);
  EXPECT_EQ(bytes(GgmlType::I2_S, {128}), 64u);
  EXPECT_THROW(bytes(GgmlType::I2_S, {100}), GgmlTypeError);
}

TEST(GgmlType, ShapesThatAreNotWholeBlocksOrOverflowAreRefused) {
  EXPECT_THROW(bytes(GgmlType::Q8_0, {31}), GgmlTypeError);
  EXPECT_THROW(bytes(GgmlType::F32, {uint64_t{1} << 32, uint64_t{1} << 32}), GgmlTypeError);
  EXPECT_THROW(bytes(GgmlType::F32, {std::numeric_limits<uint64_t>::max() / 2}), GgmlTypeError);
  EXPECT_THROW(bytes(GgmlType::TL2, {128}), GgmlTypeError);
  EXPECT_EQ(bytes(GgmlType::F32, {0, 7}), 0u);
}

}  // namespace
}  // namespace bdsl::models
