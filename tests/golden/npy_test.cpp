#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "golden/npy.h"

namespace bdsl::golden {
namespace {

TEST(Npy, RoundTripsFloatAndIntArrays) {
  const auto dir = std::filesystem::path(BDSL_BINARY_DIR) / "test-npy";
  std::filesystem::create_directories(dir);
  const std::vector<float> f{1.5f, -2.0f, 3.25f, 0.0f, 1e-30f, -7.0f};
  write_npy(dir / "f.npy", std::span<const float>(f), {2, 3});
  const auto rf = read_npy_f32(dir / "f.npy");
  EXPECT_EQ(rf.shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(rf.data, f);
  const std::vector<int32_t> i{1, -2, 2147483647};
  write_npy(dir / "i.npy", std::span<const int32_t>(i), {3});
  const auto ri = read_npy_i32(dir / "i.npy");
  EXPECT_EQ(ri.shape, (std::vector<uint64_t>{3}));
  EXPECT_EQ(ri.data, i);
}

TEST(Npy, HeaderIsWhatNumpyWrites) {
  const std::vector<int32_t> v{7};
  const auto bytes = encode_npy(std::span<const int32_t>(v), {1});
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  EXPECT_EQ(text.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_NE(text.find("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }"), std::string::npos);
  EXPECT_EQ((bytes.size() - 4) % 64, 0u);  // data aligned to 64 bytes
  EXPECT_EQ(text[bytes.size() - 5], '\n');
}

TEST(Npy, RejectsWrongDtypeAndTruncation) {
  const std::vector<float> f{1, 2, 3, 4};
  auto bytes = encode_npy(std::span<const float>(f), {2, 2});
  EXPECT_THROW(decode_npy_i32(bytes), NpyError);
  bytes.resize(bytes.size() - 1);
  EXPECT_THROW(decode_npy_f32(bytes), NpyError);
  EXPECT_THROW(encode_npy(std::span<const float>(f), {3}), NpyError);
}

// A shape whose product wraps past 2^64 (here to 0) would read as an empty array with a huge
// shape; it is refused, naming the file.
TEST(Npy, RejectsAShapeWhoseProductOverflows) {
  const std::string huge = "(4294967296, 4294967296)";
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + huge + ", }\n";
  std::string text = std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header;
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                                     reinterpret_cast<const std::byte*>(text.data()) + text.size());
  try {
    decode_npy_f32(bytes, "huge.npy");
    FAIL() << "accepted shape " << huge;
  } catch (const NpyError& e) {
    EXPECT_NE(std::string(e.what()).find("huge.npy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
  }
  const std::vector<float> none;
  const auto empty = decode_npy_f32(encode_npy(std::span<const float>(none), {4294967296, 0, 4294967296}));
  EXPECT_TRUE(empty.data.empty());
}

}  // namespace
}  // namespace bdsl::golden
