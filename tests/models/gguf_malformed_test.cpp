// A corpus of malformed GGUF files, built here: each must be refused with a GgufError whose
// message names the problem (field, byte offset, expected vs found) -- never a crash.
#include <gtest/gtest.h>

#include <string>

#include "models/formats/gguf.h"
#include "models/formats/gguf_writer.h"
#include "tests/models/gguf_bytes.h"

namespace bdsl::models {
namespace {

using testing::GgufBytes;

// The error message for `bytes`, or "" when they parse.
std::string parse_error(const std::vector<std::byte>& bytes) {
  try {
    GgufFile::parse(bytes, "bad.gguf");
  } catch (const GgufError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(bytes, text) EXPECT_THAT_ERROR(parse_error(bytes), text)
void EXPECT_THAT_ERROR(const std::string& message, std::string_view text) {
  EXPECT_NE(message.find(text), std::string::npos) << "message: " << message << "\nwanted: " << text;
}

std::vector<std::byte> small_valid_file() {
  GgufWriter w;
  w.add_string("general.architecture", "bitnet-b1.58");
  w.add_u32("n", 7);
  const std::vector<std::string> tokens = {"a", "bb"};
  w.add_string_array("tokens", tokens);
  const std::vector<int32_t> ints = {1, 2};
  const std::vector<GgufOutValue> nested = {GgufOutValue::array<int32_t>(ints)};
  w.add("nested", GgufOutValue::array_of(nested));
  const std::vector<std::byte> f32(8, std::byte{1});
  w.add_tensor("w", GgmlType::F32, {2}, f32);
  w.add_tensor("v", GgmlType::F32, {2}, f32);
  return w.to_bytes();
}

TEST(GgufMalformed, TruncationAtEveryByteIsAnErrorNotACrash) {
  const auto full = small_valid_file();
  const GgufFile parsed = GgufFile::parse(full);
  const GgufTensorInfo& last = parsed.tensors().back();
  const std::size_t data_end = last.file_offset + last.n_bytes;
  // Only the padding after the last tensor may go missing (readers that map the file need it not).
  for (std::size_t n = data_end; n < full.size(); ++n)
    EXPECT_NO_THROW(GgufFile::parse(std::span(full).first(n)));
  for (std::size_t n = 0; n < data_end; ++n) {
    const std::vector<std::byte> cut(full.begin(), full.begin() + n);
    const std::string message = parse_error(cut);
    EXPECT_FALSE(message.empty()) << "truncated to " << n << " bytes but parsed";
    EXPECT_NE(message.find("bad.gguf: "), std::string::npos) << message;
    EXPECT_NE(message.find(" at byte "), std::string::npos) << message;
  }
}

TEST(GgufMalformed, TruncatedHeaderSaysWhatWasExpected) {
  const auto bytes = GgufBytes().raw("GGUF").u32(3).bytes;
  EXPECT_EQ(parse_error(bytes), "bad.gguf: tensor count at byte 8: truncated: expected 8 bytes, "
                                "found 0 before the end of the file (size 8)");
}

TEST(GgufMalformed, EmptyFile) { EXPECT_ERROR_HAS({}, "magic at byte 0: truncated"); }

TEST(GgufMalformed, BadMagic) {
  const auto bytes = GgufBytes().raw("GGML").u32(3).u64(0).u64(0).bytes;
  EXPECT_EQ(parse_error(bytes), "bad.gguf: magic at byte 0: expected \"GGUF\", found \"GGML\"");
}

TEST(GgufMalformed, BadVersion) {
  EXPECT_ERROR_HAS(GgufBytes().header(0, 0, 4).bytes, "version at byte 4: expected 2 or 3, found 4");
  EXPECT_ERROR_HAS(GgufBytes().header(0, 0, 1).bytes, "GGUF v1 (32-bit counts) is not supported");
  EXPECT_ERROR_HAS(GgufBytes().header(0, 0, 0x03000000).bytes, "big-endian");
}

TEST(GgufMalformed, AbsurdTensorCount) {
  EXPECT_ERROR_HAS(GgufBytes().header(uint64_t{1} << 60, 0).bytes,
                   "tensor count at byte 8: count 1152921504606846976 cannot fit");
}

TEST(GgufMalformed, AbsurdKeyValueCount) {
  EXPECT_ERROR_HAS(GgufBytes().header(0, ~uint64_t{0}).bytes,
                   "metadata key/value count at byte 16: count 18446744073709551615 cannot fit");
}

TEST(GgufMalformed, AbsurdStringLength) {
  const auto bytes = GgufBytes().header(0, 1).u64(uint64_t{1} << 62).raw("key").zeros(16).bytes;
  EXPECT_ERROR_HAS(bytes, "metadata key #0 at byte 24: string length 4611686018427387904 exceeds "
                          "the 19 bytes left");
}

TEST(GgufMalformed, AbsurdArrayCount) {
  const auto bytes = GgufBytes().header(0, 1).str("k").u32(9).u32(4).u64(uint64_t{1} << 61).bytes;
  EXPECT_ERROR_HAS(bytes, "value of metadata key \"k\" at byte 41: count 2305843009213693952 "
                          "cannot fit: 0 bytes are left and each item needs at least 4");
}

TEST(GgufMalformed, UnknownValueType) {
  const auto bytes = GgufBytes().header(0, 1).str("k").u32(13).u32(0).bytes;
  EXPECT_ERROR_HAS(bytes, "value of metadata key \"k\" at byte 33: unknown value type 13");
}

TEST(GgufMalformed, DeeplyNestedArrays) {
  GgufBytes b;
  b.header(0, 1).str("k").u32(9);
  for (int i = 0; i < 100; ++i) b.u32(9).u64(1);  // array of array of array ...
  b.u32(0).u64(0);
  EXPECT_ERROR_HAS(b.bytes, "arrays nested deeper than 8 levels");
}

TEST(GgufMalformed, DuplicateKey) {
  const auto bytes = GgufBytes().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).bytes;
  EXPECT_ERROR_HAS(bytes, "metadata key #1 at byte 41: duplicate key \"k\"");
}

TEST(GgufMalformed, AlignmentNotAPowerOfTwo) {
  const auto bytes = GgufBytes().header(0, 1).kv_u32("general.alignment", 48).bytes;
  EXPECT_ERROR_HAS(bytes, "\"general.alignment\" at byte 24: expected a power of two, found 48");
  const auto zero = GgufBytes().header(0, 1).kv_u32("general.alignment", 0).bytes;
  EXPECT_ERROR_HAS(zero, "expected a power of two, found 0");
}

TEST(GgufMalformed, AlignmentOfWrongType) {
  const auto bytes = GgufBytes().header(0, 1).str("general.alignment").u32(0).put<uint8_t>(32).bytes;
  EXPECT_ERROR_HAS(bytes, "\"general.alignment\" at byte 24: expected uint32, found uint8");
}

TEST(GgufMalformed, UnknownTensorType) {
  auto b = GgufBytes().header(1, 0).tensor("w", {4}, static_cast<GgmlType>(99), 0);
  b.pad_to(32).zeros(64);
  EXPECT_ERROR_HAS(b.bytes, "tensor \"w\" type at byte 45: unknown ggml type id 99");
}

TEST(GgufMalformed, TooManyDims) {
  auto b = GgufBytes().header(1, 0).tensor("w", {1, 1, 1, 1, 1}, GgmlType::F32, 0);
  EXPECT_ERROR_HAS(b.bytes, "tensor \"w\" n_dims at byte 33: expected at most 4, found 5");
}

TEST(GgufMalformed, DimsProductOverflows) {
  auto b = GgufBytes().header(1, 0).tensor("w", {uint64_t{1} << 40, uint64_t{1} << 40}, GgmlType::F32, 0);
  EXPECT_ERROR_HAS(b.bytes, "tensor \"w\" shape at byte 33: element count overflows 64 bits");
}

TEST(GgufMalformed, ByteSizeOverflows) {
  auto b = GgufBytes().header(1, 0).tensor("w", {uint64_t{1} << 62}, GgmlType::F32, 0);
  EXPECT_ERROR_HAS(b.bytes, "tensor \"w\" shape at byte 33: tensor byte size overflows 64 bits");
}

TEST(GgufMalformed, RowNotAWholeNumberOfBlocks) {
  auto b = GgufBytes().header(1, 0).tensor("w", {33}, GgmlType::Q8_0, 0);
  EXPECT_ERROR_HAS(b.bytes, "Q8_0 needs ne0 to be a multiple of its block size 32, found 33");
}

TEST(GgufMalformed, TensorPastTheEndOfTheFile) {
  auto b = GgufBytes().header(1, 0).tensor("w", {16}, GgmlType::F32, 32);
  b.pad_to(32).zeros(64);  // the data section holds 64 bytes; w wants [32, 96)
  EXPECT_ERROR_HAS(b.bytes, "tensor \"w\" data at byte 96: expected 64 bytes at data offset 32 "
                            "(file byte 96), but the data section holds only 64 bytes");
}

TEST(GgufMalformed, TensorOffsetBeyondEverything) {
  auto b = GgufBytes().header(1, 0).tensor("w", {1}, GgmlType::F32, uint64_t{1} << 63);
  b.pad_to(32).zeros(32);
  EXPECT_ERROR_HAS(b.bytes, "tensor \"w\" data");
}

TEST(GgufMalformed, OverlappingTensors) {
  auto b = GgufBytes().header(2, 0).tensor("a", {16}, GgmlType::F32, 0).tensor("b", {8}, GgmlType::F32, 32);
  b.pad_to(32).zeros(64);
  EXPECT_ERROR_HAS(b.bytes, "tensor \"b\" data at byte 128: overlaps tensor \"a\": it starts at "
                            "data offset 32, before the other ends at 64");
}

TEST(GgufMalformed, MisalignedTensorOffset) {
  auto b = GgufBytes().header(1, 0).tensor("w", {1}, GgmlType::F32, 4);
  b.pad_to(32).zeros(64);
  EXPECT_ERROR_HAS(b.bytes, "tensor \"w\" offset at byte 49: expected a multiple of the alignment 32, found 4");
}

TEST(GgufMalformed, DuplicateTensorName) {
  auto b = GgufBytes().header(2, 0).tensor("a", {8}, GgmlType::F32, 0).tensor("a", {8}, GgmlType::F32, 32);
  b.pad_to(32).zeros(64);
  EXPECT_ERROR_HAS(b.bytes, "tensor info #1 at byte 57: duplicate tensor name \"a\"");
}

TEST(GgufMalformed, DataSectionStartPastTheEnd) {
  auto b = GgufBytes().header(1, 0).tensor("w", {0}, GgmlType::F32, 0);  // no padding written
  EXPECT_ERROR_HAS(b.bytes, "data section padding at byte 57: truncated");
}

TEST(GgufMalformed, TensorSizeOfTl1IsRefused) {
  auto b = GgufBytes().header(1, 0).tensor("w", {128}, GgmlType::TL1, 0);
  EXPECT_ERROR_HAS(b.bytes, "the size of a TL1 tensor depends on bitnet.cpp's kernel tiling");
}

}  // namespace
}  // namespace bdsl::models
