// The upload ring (runtime/upload_ring.h) puts the same bytes on the device as a plain upload:
// many small uploads, one larger than the whole ring, uploads at offsets, a host-visible target,
// and a range outside the buffer refused with the buffer named.
#include <gtest/gtest.h>

#include <random>

#include "runtime/upload_ring.h"
#include "vulkan_test.h"

namespace bdsl::rt {
namespace {

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> b(n);
  for (auto& x : b) x = std::byte(rng() & 0xff);
  return b;
}

std::vector<std::byte> download(const Buffer& b) {
  std::vector<std::byte> out(b.size());
  b.download_bytes(out);
  return out;
}

using UploadRingTest = VulkanTest;

TEST_F(UploadRingTest, PutsTheSameBytesAsAPlainUpload) {
  UploadRing ring(ctx(), 4096, 2);  // 8 KiB of staging in all
  std::vector<Buffer> buffers;
  std::vector<std::vector<std::byte>> data;
  for (size_t n : {size_t(4), size_t(4096), size_t(5000), size_t(100'000), size_t(12)}) {
    buffers.emplace_back(ctx(), n, BufferOptions{.name = "target"});
    data.push_back(random_bytes(n, uint32_t(n)));
    ring.upload(buffers.back(), data.back());
  }
  ring.finish();
  for (size_t i = 0; i < buffers.size(); ++i) EXPECT_EQ(download(buffers[i]), data[i]) << "buffer " << i;
}

TEST_F(UploadRingTest, ALargeChunkCopiedBySeveralThreadsArrivesWhole) {
  UploadRing ring(ctx(), 16ull << 20, 2);
  Buffer target(ctx(), 20ull << 20, {.name = "large target"});
  const auto data = random_bytes(20ull << 20, 7);
  ring.upload(target, data);
  ring.finish();
  EXPECT_EQ(download(target), data);
}

TEST_F(UploadRingTest, WritesAtOffsetsAndIntoHostVisibleBuffers) {
  UploadRing ring(ctx(), 1024, 3);
  Buffer device(ctx(), 10'000, {.name = "device"}), host(ctx(), 10'000, {.host_visible = true, .name = "host"});
  const auto a = random_bytes(10'000, 1), b = random_bytes(3'000, 2);
  for (Buffer* t : {&device, &host}) {
    ring.upload(*t, a);
    ring.upload(*t, b, 4'000);  // after the first copy: the later one wins
  }
  ring.finish();
  auto want = a;
  std::copy(b.begin(), b.end(), want.begin() + 4'000);
  EXPECT_EQ(download(device), want);
  EXPECT_EQ(download(host), want);
}

TEST_F(UploadRingTest, RefusesARangeOutsideTheBuffer) {
  UploadRing ring(ctx(), 1024, 2);
  Buffer small(ctx(), 100, {.name = "small target"});
  const auto data = random_bytes(64, 3);
  try {
    ring.upload(small, data, 50);
    FAIL() << "expected out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("small target"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("offset 50"), std::string::npos) << e.what();
  }
  EXPECT_THROW(UploadRing(ctx(), 0, 2), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::rt
