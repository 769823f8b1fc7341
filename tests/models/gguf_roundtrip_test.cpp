// GGUF writer -> reader round trips: every metadata type, nested arrays, tensors, alignment,
// a file on disk (mmap path), and the typed accessors' errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include "models/formats/gguf.h"
#include "models/formats/gguf_writer.h"
#include "temp_dir.h"

namespace bdsl::models {
namespace {

std::vector<std::byte> bytes_of(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v) out.push_back(static_cast<std::byte>(x));
  return out;
}

GgufWriter writer_with_every_type() {
  GgufWriter w;
  w.add("u8", GgufOutValue::u8(200));
  w.add("i8", GgufOutValue::i8(-100));
  w.add("u16", GgufOutValue::u16(60000));
  w.add("i16", GgufOutValue::i16(-30000));
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -2000000000);
  w.add_u64("u64", std::numeric_limits<uint64_t>::max());
  w.add("i64", GgufOutValue::i64(std::numeric_limits<int64_t>::min()));
  w.add_f32("f32", 1.5f);
  w.add("f64", GgufOutValue::f64(-2.25));
  w.add_bool("bool", true);
  w.add_string("string", "h\xC3\xA9llo \"world\"");
  const std::vector<int32_t> ints = {1, -2, 3};
  w.add_array<int32_t>("ints", ints);
  const std::vector<float> floats = {0.5f, -1.0f};
  w.add_array<float>("floats", floats);
  const bool bools[] = {true, false, true};
  w.add_array<bool>("bools", bools);
  const std::vector<std::string> strings = {"a", "", "ccc"};
  w.add_string_array("strings", strings);
  const std::vector<uint8_t> inner1 = {1, 2};
  const std::vector<std::string> inner2 = {"x"};
  const std::vector<GgufOutValue> nested = {GgufOutValue::array<uint8_t>(inner1),
                                            GgufOutValue::string_array(inner2)};
  w.add("nested", GgufOutValue::array_of(nested));
  return w;
}

TEST(GgufRoundTrip, EveryScalarTypeReadsBackExactly) {
  const auto bytes = writer_with_every_type().to_bytes();
  const GgufFile f = GgufFile::parse(bytes);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_as<uint8_t>("u8"), 200);
  EXPECT_EQ(f.get_as<int8_t>("i8"), -100);
  EXPECT_EQ(f.get_as<uint16_t>("u16"), 60000);
  EXPECT_EQ(f.get_as<int16_t>("i16"), -30000);
  EXPECT_EQ(f.get_u32("u32"), 4000000000u);
  EXPECT_EQ(f.get_i32("i32"), -2000000000);
  EXPECT_EQ(f.get_u64("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_as<int64_t>("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_f32("f32"), 1.5f);
  EXPECT_EQ(f.get_as<double>("f64"), -2.25);
  EXPECT_TRUE(f.get_bool("bool"));
  EXPECT_EQ(f.get_string("string"), "h\xC3\xA9llo \"world\"");
  EXPECT_EQ(f.metadata().size(), 17u);
  EXPECT_EQ(f.metadata().front().key, "u8");  // file order is kept
}

TEST(GgufRoundTrip, ArraysIncludingNestedReadBack) {
  const auto bytes = writer_with_every_type().to_bytes();
  const GgufFile f = GgufFile::parse(bytes);
  EXPECT_EQ(f.get_array_of<int32_t>("ints"), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(f.get_array_of<float>("floats"), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_EQ(f.get_array_of<bool>("bools"), (std::vector<bool>{true, false, true}));
  const auto strings = f.get_string_array("strings");
  ASSERT_EQ(strings.size(), 3u);
  EXPECT_EQ(strings[0], "a");
  EXPECT_EQ(strings[1], "");
  EXPECT_EQ(strings[2], "ccc");
  const GgufArray& nested = f.get_array("nested");
  ASSERT_EQ(nested.element_type(), GgufValueType::ARRAY);
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested.at(0).as_array().to_vector<uint8_t>(), (std::vector<uint8_t>{1, 2}));
  EXPECT_EQ(nested.at(1).as_array().strings()[0], "x");
}

TEST(GgufRoundTrip, TensorsAreAlignedAndTheirBytesReadBack) {
  GgufWriter w;
  const auto a = bytes_of({1, 2, 3, 4, 5, 6, 7, 8});  // F32 [2]
  const auto b = bytes_of({9, 10});                    // F16 [1]
  w.add_tensor("a", GgmlType::F32, {2}, a);
  w.add_tensor("b", GgmlType::F16, {1}, b);
  w.add_tensor("c", GgmlType::I8, {3}, [](std::span<std::byte> out) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::byte(0xA0 + i);
  });
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.data_offset(), w.data_offset());
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.tensor("a").offset, 0u);
  EXPECT_EQ(f.tensor("b").offset, 32u);
  EXPECT_EQ(f.tensor("c").offset, 64u);
  EXPECT_EQ(bytes.size() % 32, 0u);  // the last tensor is padded too
  const auto data_a = f.tensor_data("a");
  EXPECT_TRUE(std::equal(data_a.begin(), data_a.end(), a.begin(), a.end()));
  EXPECT_EQ(f.tensor_data("c")[2], std::byte{0xA2});
  EXPECT_EQ(f.tensor("b").type, GgmlType::F16);
  EXPECT_EQ(f.tensor("b").dims, (std::vector<uint64_t>{1}));
}

TEST(GgufRoundTrip, CustomAlignmentIsWrittenAndHonoured) {
  GgufWriter w(64);
  w.add_tensor("a", GgmlType::F32, {1}, bytes_of({0, 0, 128, 63}));
  w.add_tensor("b", GgmlType::F32, {1}, bytes_of({0, 0, 0, 64}));
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_u32("general.alignment"), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.tensor("b").offset, 64u);
}

TEST(GgufRoundTrip, I2sTensorSizeIsQuarterPlusScale) {
  GgufWriter w;
  std::vector<std::byte> data(256 / 4 + 32);
  w.add_tensor("q", GgmlType::I2_S, {128, 2}, data);
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes);
  EXPECT_EQ(f.tensor("q").n_bytes, 96u);
  EXPECT_EQ(f.tensor("q").n_elements, 256u);
}

TEST(GgufRoundTrip, VersionTwoFilesAreRead) {
  auto bytes = writer_with_every_type().to_bytes();
  bytes[4] = std::byte{2};  // v2 and v3 share the layout (v3 added big-endian files)
  EXPECT_EQ(GgufFile::parse(bytes).version(), 2u);
}

TEST(GgufRoundTrip, FileOnDiskIsMappedAndReadBack) {
  const bdsl::test::TempDir dir("gguf-roundtrip");
  const auto path = dir / "model.gguf";
  GgufWriter w = writer_with_every_type();
  w.add_tensor("t", GgmlType::F32, {4, 2}, [](std::span<std::byte> out) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::byte(i);
  });
  w.write(path);
  {
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.name(), path.string());
    EXPECT_EQ(f.bytes().size(), w.total_size());
    EXPECT_EQ(f.tensor_data("t")[31], std::byte{31});
    GgufFile moved = std::move(const_cast<GgufFile&>(f));
    EXPECT_EQ(moved.get_string("string"), "h\xC3\xA9llo \"world\"");  // views survive a move
  }
}

TEST(GgufAccessors, WrongTypeNamesKeyExpectedAndFound) {
  const auto bytes = writer_with_every_type().to_bytes();
  const GgufFile f = GgufFile::parse(bytes, "m.gguf");
  try {
    (void)f.get_u32("string");
    FAIL();
  } catch (const GgufError& e) {
    EXPECT_STREQ(e.what(), "m.gguf: metadata key \"string\": expected uint32, found string");
  }
  EXPECT_THROW((void)f.get_string_array("ints"), GgufError);
  EXPECT_THROW((void)f.get_array_of<uint32_t>("ints"), GgufError);
}

TEST(GgufAccessors, MissingKeysAndTensorsAreNamed) {
  const auto bytes = writer_with_every_type().to_bytes();
  const GgufFile f = GgufFile::parse(bytes, "m.gguf");
  EXPECT_FALSE(f.find_u32("nope").has_value());
  EXPECT_EQ(f.find_array("nope"), nullptr);
  try {
    (void)f.get_u32("nope");
    FAIL();
  } catch (const GgufError& e) {
    EXPECT_STREQ(e.what(), "m.gguf: missing metadata key \"nope\"");
  }
  try {
    (void)f.tensor_data("w");
    FAIL();
  } catch (const GgufError& e) {
    EXPECT_STREQ(e.what(), "m.gguf: missing tensor \"w\"");
  }
}

TEST(GgufAccessors, LenientIntegerAndFloatLookups) {
  const auto bytes = writer_with_every_type().to_bytes();
  const GgufFile f = GgufFile::parse(bytes);
  EXPECT_EQ(f.get_uint("u8"), 200u);
  EXPECT_EQ(f.get_uint("u32"), 4000000000u);
  EXPECT_THROW((void)f.get_uint("i8"), GgufError);  // negative
  EXPECT_THROW((void)f.get_uint("f32"), GgufError);
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(f.get_float("i16"), -30000.0);
  EXPECT_THROW((void)f.get_float("string"), GgufError);
}

TEST(GgufValueText, LongArraysAreSummarisedAndJsonIsEscaped) {
  GgufWriter w;
  std::vector<uint32_t> many(100);
  for (uint32_t i = 0; i < 100; ++i) many[i] = i;
  w.add_array<uint32_t>("many", many);
  w.add_string("s", "a\"b\\c\n\x01\xFF");
  w.add("nan", GgufOutValue::f32(std::numeric_limits<float>::quiet_NaN()));
  const auto bytes = w.to_bytes();
  const GgufFile f = GgufFile::parse(bytes);
  EXPECT_EQ(f.get("many").to_string(3), "[0, 1, 2, ... (100 items)]");
  EXPECT_EQ(f.get("many").to_string(3, true), "[0, 1, 2, {\"omitted\": 97}]");
  EXPECT_EQ(f.get("s").to_string(8, true), "\"a\\\"b\\\\c\\n\\u0001\\ufffd\"");
  EXPECT_EQ(f.get("nan").to_string(8, true), "null");
}

TEST(GgufWriterErrors, DuplicatesAndWrongSizesAreRefused) {
  GgufWriter w;
  w.add_u32("k", 1);
  EXPECT_THROW(w.add_u32("k", 2), std::invalid_argument);
  w.add_tensor("t", GgmlType::F32, {1}, bytes_of({0, 0, 0, 0}));
  EXPECT_THROW(w.add_tensor("t", GgmlType::F32, {1}, bytes_of({0, 0, 0, 0})), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("u", GgmlType::F32, {2}, bytes_of({0, 0, 0, 0})), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("v", GgmlType::I2_S, {100}, bytes_of({})), std::invalid_argument);
  EXPECT_THROW(GgufWriter(48), std::invalid_argument);
  const std::vector<GgufOutValue> mixed = {GgufOutValue::u8(1), GgufOutValue::u16(2)};
  EXPECT_THROW(GgufOutValue::array_of(mixed), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::models
