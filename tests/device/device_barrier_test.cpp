// dsl::device_barrier() (a workgroup barrier with device-scope acquire and release) must hold
// every invocation of the workgroup until all have reached it, as barrier() does: a value one
// invocation writes before it, to shared or to buffer memory, is what every other reads after it.
#include "device_test.h"

namespace bdsl::test {
namespace {
using namespace dsl;

class DeviceBarrier : public DeviceTest {
 protected:
  void expect_code_after_the_loop_runs(bool memory_model);
};

// The last invocation writes a shared word and a buffer word; every invocation reads both after the barrier.
Kernel last_writes_first_reads(uint32_t wg, bool device) {
  KernelBuilder k(device ? "device_barrier_probe" : "barrier_probe", {wg, 1, 1});
  auto scratch = k.handoff_buffer<u32>("scratch", Access::ReadWrite);
  auto out = k.buffer<u32>("out", Access::Write);
  auto flag = k.shared<u32>("flag", 1);
  auto lid = k.local_index();
  auto wid = k.workgroup_id().x();
  if_(lid == 0u, [&] { flag[0u] = constant<u32>(0u); });
  device ? device_barrier() : barrier(true);
  if_(lid == wg - 1, [&] {
    flag[0u] = wid + 100u;
    scratch[wid * wg] = wid + 1000u;
  });
  device ? device_barrier() : barrier(true);
  out[wid * wg + lid] = Expr<u32>(flag[0u]) * 10000u + Expr<u32>(scratch[wid * wg]);
  return k.build();
}

TEST_F(DeviceBarrier, HoldsEveryInvocationAsBarrierDoes) {
  if (!ctx().info().vulkan_memory_model) GTEST_SKIP() << "the device has no Vulkan memory model";
  const uint32_t wg = 64, groups = 4;
  for (bool device : {false, true}) {
    rt::Buffer scratch = buffer_of(std::vector<uint32_t>(groups * wg, 0u), "scratch");
    rt::Buffer out = buffer_of(std::vector<uint32_t>(groups * wg, 0u), "out");
    run(last_writes_first_reads(wg, device), {scratch, out}, groups);
    const auto got = out.download<uint32_t>();
    for (uint32_t w = 0; w < groups; ++w)
      for (uint32_t i = 0; i < wg; ++i)
        ASSERT_EQ(got[w * wg + i], (w + 100u) * 10000u + w + 1000u) << (device ? "device_barrier" : "barrier") << " workgroup " << w << " invocation " << i;
  }
}

// The last workgroup to count itself on an atomic sums every workgroup's partials (attention's
// combine, ops/common/handoff.h) with device_barrier() on either side of the count.
Kernel last_arrival_sums(uint32_t wg, uint32_t groups) {
  KernelBuilder k("last_arrival_sums", {wg, 1, 1});
  auto parts = k.handoff_buffer<u32>("parts", Access::ReadWrite);
  auto counter = k.buffer<u32>("counter", Access::ReadWrite);
  auto out = k.buffer<u32>("out", Access::Write);
  auto is_last = k.shared<u32>("is_last", 1);
  auto lid = k.local_index();
  auto wid = k.workgroup_id().x();
  parts[wid * wg + lid] = wid * 1000u + lid;
  device_barrier();
  if_(lid == 0u, [&] {
    auto before = atomic_add(counter[0u], 1u);
    is_last[0u] = select(before == groups - 1u, 1u, 0u);
  });
  device_barrier();
  if_(Expr<u32>(is_last[0u]) == 1u, [&] {
    auto sum = k.var<u32>("sum", 0u);
    for_range(0u, groups, [&](Expr<u32> w) { sum = sum + Expr<u32>(parts[w * wg + lid]); }, "w");
    out[lid] = Expr<u32>(sum);
  });
  return k.build();
}

TEST_F(DeviceBarrier, TheLastArrivalReadsEveryWorkgroupsPartial) {
  if (!ctx().info().vulkan_memory_model) GTEST_SKIP() << "the device has no Vulkan memory model";
  const uint32_t wg = 64, groups = 40;
  rt::Buffer parts = buffer_of(std::vector<uint32_t>(groups * wg, 0u), "parts");
  rt::Buffer counter = buffer_of(std::vector<uint32_t>(1, 0u), "counter");
  rt::Buffer out = buffer_of(std::vector<uint32_t>(wg, 0u), "out");
  run(last_arrival_sums(wg, groups), {parts, counter, out}, groups);
  const auto got = out.download<uint32_t>();
  for (uint32_t i = 0; i < wg; ++i) ASSERT_EQ(got[i], groups * (groups - 1) / 2 * 1000u + groups * i) << "invocation " << i;
}

// A strided loop that reads two words of shared memory, then a write after the loop: what
// attention's combine does between its partials and its output. Under the Vulkan memory model
// (the handoff buffer puts the kernel there) lavapipe (Mesa 22.3) runs the loop and then nothing
// after it: the write after the loop never lands, in any invocation (docs/driver-notes.md). With
// one shared load in the loop, or the loop written as an `if`, it does. Plain kernels are right.
Kernel loop_of_shared_pairs(uint32_t wg, bool memory_model) {
  KernelBuilder k(memory_model ? "shared_pairs_memory_model" : "shared_pairs", {wg, 1, 1});
  std::optional<Buffer<u32>> handoff;
  if (memory_model) handoff = k.handoff_buffer<u32>("handoff", Access::ReadWrite);
  auto inside = k.buffer<u32>("inside", Access::Write);
  auto after = k.buffer<u32>("after", Access::Write);
  auto words = k.shared<u32>("words", 2 * wg);
  auto lid = k.local_index();
  words[2u * lid] = lid;
  words[2u * lid + 1u] = lid * 100u;
  barrier(true);
  for_range(lid, constant<u32>(wg / 2), constant<u32>(wg), [&](Expr<u32> i) {
    inside[i] = Expr<u32>(words[2u * i]) + Expr<u32>(words[2u * i + 1u]);
  }, "i");
  after[lid] = lid + 7u;
  if (handoff) (*handoff)[lid] = lid;
  return k.build();
}

void DeviceBarrier::expect_code_after_the_loop_runs(bool memory_model) {
  const uint32_t wg = 64;
  rt::Buffer handoff = buffer_of(std::vector<uint32_t>(wg, 0u), "handoff");
  rt::Buffer inside = buffer_of(std::vector<uint32_t>(wg / 2, 0u), "inside");
  rt::Buffer after = buffer_of(std::vector<uint32_t>(wg, 0u), "after");
  if (memory_model)
    run(loop_of_shared_pairs(wg, true), {handoff, inside, after}, 1);
  else
    run(loop_of_shared_pairs(wg, false), {inside, after}, 1);
  const auto in = inside.download<uint32_t>();
  const auto af = after.download<uint32_t>();
  for (uint32_t i = 0; i < wg / 2; ++i) ASSERT_EQ(in[i], i * 101u) << "in the loop, " << i;
  for (uint32_t i = 0; i < wg; ++i) ASSERT_EQ(af[i], i + 7u) << "after the loop, invocation " << i;
}

TEST_F(DeviceBarrier, CodeAfterALoopOfSharedLoadsRuns) { expect_code_after_the_loop_runs(false); }

TEST_F(DeviceBarrier, CodeAfterALoopOfSharedLoadsRunsUnderTheMemoryModel) {
  if (!ctx().info().vulkan_memory_model) GTEST_SKIP() << "the device has no Vulkan memory model";
  if (ctx().info().type == rt::DeviceType::Cpu)
    GTEST_SKIP() << "lavapipe (Mesa 22.3) drops the code after such a loop under the memory model (docs/driver-notes.md)";
  expect_code_after_the_loop_runs(true);
}

}  // namespace
}  // namespace bdsl::test
