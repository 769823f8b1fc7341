// Buffer::over_host: host memory the device reads where it lies (VK_EXT_external_memory_host),
// as a CPU device (lavapipe) reads a mapped model file. A kernel and a download see the host's
// bytes, also when they start past the offset the device binds a buffer at (the buffer's origin),
// the view keeps its owner alive, and every write into it is refused naming the buffer.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <numeric>

#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "vulkan_test.h"

namespace bdsl::rt {
namespace {

using HostView = VulkanTest;

// Page-aligned anonymous pages, unmapped when the last owner goes.
std::shared_ptr<std::byte> pages(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
  return {static_cast<std::byte*>(p), [bytes](std::byte* q) { munmap(q, bytes); }};
}

class HostViewTest : public HostView {
 protected:
  void SetUp() override {
    HostView::SetUp();
    if (!ctx().info().host_import_alignment) GTEST_SKIP() << ctx().info().name << " reads no host memory in place";
  }
};

// The bytes at every offset a GGUF tensor may start at (a multiple of 32) read by a kernel and
// by a download: the same values as the host wrote.
TEST_F(HostViewTest, AKernelAndADownloadReadTheHostBytesAtAnyTensorOffset) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  auto memory = pages(4 * page);
  constexpr uint32_t kN = 256;
  Pipeline scale = pipeline(test_kernels::scale());
  for (size_t offset : {size_t{0}, size_t{32}, size_t{64}, size_t{96}, page - 32, page + 160}) {
    std::vector<float> values(kN);
    std::iota(values.begin(), values.end(), float(offset));
    std::memcpy(memory.get() + offset, values.data(), kN * 4);
    auto view = Buffer::over_host(ctx(), {memory.get() + offset, kN * 4}, memory, {.name = "host floats"});
    ASSERT_TRUE(view.has_value()) << "offset " << offset;
    EXPECT_TRUE(view->read_only());
    EXPECT_EQ(view->size(), kN * 4);
    EXPECT_EQ(view->download<float>(), values) << "offset " << offset;
    Buffer out(ctx(), kN * 4, {.name = "out"});
    Graph g(ctx());
    g.dispatch(scale, {*view, out}, push(kN, 2.0f), Grid{kN / 64});
    g.submit_and_wait();
    std::vector<float> doubled(values);
    for (float& v : doubled) v *= 2;
    EXPECT_EQ(out.download<float>(), doubled) << "offset " << offset;
    // A slice of the view: its offset counts from the view's first byte, not from its page.
    EXPECT_EQ(view->download<float>(16, 2), (std::vector<float>{values[4], values[5]}));
  }
}

// The view keeps what it was given alive: the caller's handle may go first.
TEST_F(HostViewTest, TheViewKeepsItsOwnerAlive) {
  auto memory = pages(size_t(sysconf(_SC_PAGESIZE)));
  std::weak_ptr<std::byte> watch = memory;
  const std::vector<uint32_t> words = {1, 2, 3, 4, 5, 6, 7, 8};
  std::memcpy(memory.get(), words.data(), 32);
  auto view = Buffer::over_host(ctx(), {memory.get(), 32}, memory, {.name = "owned"});
  ASSERT_TRUE(view.has_value());
  memory.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(view->download<uint32_t>(), words);
  Buffer moved = std::move(*view);
  view.reset();
  EXPECT_EQ(moved.download<uint32_t>(), words);
  moved = Buffer();
  EXPECT_TRUE(watch.expired());
}

// Uploads, fills, copies into it and kernels that write it: each refused, naming the buffer.
TEST_F(HostViewTest, EveryWriteIntoAViewIsRefusedNamingIt) {
  auto memory = pages(size_t(sysconf(_SC_PAGESIZE)));
  auto view = Buffer::over_host(ctx(), {memory.get(), 1024}, memory, {.name = "weights view"});
  ASSERT_TRUE(view.has_value());
  const std::vector<uint32_t> words(256, 1);
  EXPECT_NE(error_of([&] { view->upload(words); }).find("'weights view'"), std::string::npos);
  EXPECT_NE(error_of([&] { view->fill(0); }).find("read-only"), std::string::npos);
  Buffer source(ctx(), 1024, {.name = "source"});
  Graph copy(ctx());
  EXPECT_NE(error_of([&] { copy.copy(source, *view); }).find("'weights view'"), std::string::npos);
  Graph fill(ctx());
  EXPECT_NE(error_of([&] { fill.fill(*view, 0); }).find("read-only"), std::string::npos);
  Pipeline add = pipeline(test_kernels::add_one());
  Graph g(ctx());
  const std::string e = error_of([&] { g.dispatch(add, {*view}, push(256u), Grid{4}); });
  EXPECT_NE(e.find("writes"), std::string::npos) << e;
  EXPECT_NE(e.find("'weights view'"), std::string::npos) << e;
  EXPECT_EQ(view->download<uint32_t>(), std::vector<uint32_t>(256, 0)) << "the host's bytes are untouched";
}

// Bytes the device cannot bind where they lie (an offset that is not a multiple of the storage
// buffer alignment): no view, so the caller copies them instead.
TEST_F(HostViewTest, BytesTheDeviceCannotBindWhereTheyLieGiveNoView) {
  auto memory = pages(size_t(sysconf(_SC_PAGESIZE)));
  const uint64_t align = std::max<uint64_t>(ctx().info().min_storage_buffer_offset_alignment, 4);
  EXPECT_FALSE(Buffer::over_host(ctx(), {memory.get() + align / 2 + 1, 64}, memory).has_value());
  EXPECT_FALSE(Buffer::over_host(ctx(), {memory.get(), 0}, memory).has_value());
}

}  // namespace
}  // namespace bdsl::rt
