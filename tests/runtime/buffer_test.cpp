// Buffers: round trips through staging and mapped memory, offsets, and size errors.
#include <gtest/gtest.h>

#include <numeric>

#include "runtime/buffer.h"
#include "vulkan_test.h"

namespace bdsl::rt {
namespace {

using BufferTest = VulkanTest;

std::vector<uint32_t> iota_words(size_t n, uint32_t start = 0) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST_F(BufferTest, DeviceLocalRoundTripGoesThroughStaging) {
  Buffer b(ctx(), 1000 * sizeof(uint32_t), {.name = "words"});
  EXPECT_FALSE(b.host_visible());
  const auto words = iota_words(1000, 7);
  b.upload(words);
  EXPECT_EQ(b.download<uint32_t>(), words);
}

TEST_F(BufferTest, HostVisibleRoundTripIsMapped) {
  Buffer b(ctx(), 64 * sizeof(float), {.host_visible = true, .name = "mapped"});
  EXPECT_TRUE(b.host_visible());
  std::vector<float> values(64, 1.5f);
  b.upload(values);
  EXPECT_EQ(b.download<float>(), values);
}

// The memory preference changes where the buffer lives, never that the host can map it.
TEST_F(BufferTest, HostVisibleReadOftenByTheGpuIsStillMapped) {
  Buffer b(ctx(), 16 * sizeof(uint32_t), {.host_visible = true, .name = "step", .gpu_reads_often = true});
  EXPECT_TRUE(b.host_visible());
  const auto words = iota_words(16, 3);
  b.upload(words);
  EXPECT_EQ(b.download<uint32_t>(), words);
}

TEST_F(BufferTest, OffsetsSelectPartOfTheBuffer) {
  Buffer b(ctx(), 16 * sizeof(uint32_t));
  b.upload(iota_words(16));
  b.upload(std::vector<uint32_t>{100, 101}, 4 * sizeof(uint32_t));
  EXPECT_EQ(b.download<uint32_t>(3 * sizeof(uint32_t), 4),
            (std::vector<uint32_t>{3, 100, 101, 6}));
}

TEST_F(BufferTest, FillWritesAWordPattern) {
  Buffer b(ctx(), 8 * sizeof(uint32_t));
  b.fill(0);
  b.fill(0xabcdu, 2 * sizeof(uint32_t), 3 * sizeof(uint32_t));
  EXPECT_EQ(b.download<uint32_t>(), (std::vector<uint32_t>{0, 0, 0xabcd, 0xabcd, 0xabcd, 0, 0, 0}));
  EXPECT_THROW(b.fill(0, 2, 4), std::invalid_argument);
}

TEST_F(BufferTest, ZeroSizeIsRefusedWithTheName) {
  try {
    Buffer b(ctx(), 0, {.name = "empty_one"});
    FAIL() << "a zero-size buffer was created";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("empty_one"), std::string::npos) << e.what();
  }
}

TEST_F(BufferTest, OutOfRangeTransfersAreRefusedWithSizes) {
  Buffer b(ctx(), 16, {.name = "small"});
  try {
    b.upload(iota_words(5));  // 20 bytes
    FAIL() << "an upload past the end was accepted";
  } catch (const std::out_of_range& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("small"), std::string::npos) << m;
    EXPECT_NE(m.find("20 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("16 bytes"), std::string::npos) << m;
  }
  EXPECT_THROW(b.upload(iota_words(2), 12), std::out_of_range);
  EXPECT_THROW(b.download<uint32_t>(8, 3), std::out_of_range);
  EXPECT_THROW(b.slice(8, 16), std::out_of_range);
  EXPECT_THROW(b.slice(UINT64_MAX, 2), std::out_of_range);
}

TEST_F(BufferTest, TooLargeForTheDeviceIsRefused) {
  const uint64_t too_big = ctx().info().max_memory_allocation + 1;
  EXPECT_THROW(Buffer(ctx(), too_big, {.name = "huge"}), std::invalid_argument);
}

TEST_F(BufferTest, MovedBuffersKeepTheirContents) {
  Buffer a(ctx(), 4 * sizeof(uint32_t));
  a.upload(iota_words(4));
  Buffer b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_EQ(b.download<uint32_t>(), iota_words(4));
  EXPECT_THROW(a.download<uint32_t>(0, 1), std::logic_error);
}

}  // namespace
}  // namespace bdsl::rt
