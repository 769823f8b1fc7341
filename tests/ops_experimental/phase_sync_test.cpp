// Phases of one dispatch handed over by counters (ops/experimental/phase_sync.h): the second phase's
// workgroups read what every workgroup of the first wrote, over several submissions.
#include <iostream>
#include <numeric>

#include "device_test.h"
#include "ops/common/step_state.h"
#include "ops/experimental/phase_sync.h"

namespace bdsl::test {
namespace {
using namespace dsl;

constexpr uint32_t kWorkgroup = 64;

// Workgroups [0, groups) write a[i] = in[i] * 3 + epoch; workgroups [groups, 2 groups) wait for
// all of them and write out[i] = a[(i * 7 + 3) % n] + 1 (each element from another workgroup).
// memory_model: `a` a handoff buffer, handed over through the Vulkan memory model (else coherent).
Kernel two_phases(uint32_t groups, bool memory_model, uint32_t spin_limit = ops::kPhaseSpinLimit) {
  KernelBuilder k(memory_model ? "two_phases_mm" : "two_phases", {kWorkgroup, 1, 1});
  auto step = k.buffer<u32>("step", Access::Read);
  auto counters = k.volatile_buffer<u32>("counters", Access::ReadWrite);
  auto in = k.buffer<u32>("in", Access::Read);
  auto a = memory_model ? k.handoff_buffer<u32>("a", Access::ReadWrite) : k.coherent_buffer<u32>("a", Access::ReadWrite);
  auto out = k.buffer<u32>("out", Access::Write);
  auto n = k.push<u32>("n");
  const ops::PhaseSync sync(k, step, counters, spin_limit, memory_model);
  auto id = k.workgroup_id().x();
  if_(id < groups, [&] {
    auto i = let("i", id * kWorkgroup + k.local_index());
    // Slow on purpose (a few thousand dependent steps whose result is zero), so that the second
    // phase's workgroups really wait.
    auto slow = k.var<u32>("slow", Expr<u32>(in[min(i, n - 1u)]));
    for_range(0u, 4000u, [&](Expr<u32> j) { slow = (Expr<u32>(slow) * 1664525u + j) | 1u; }, "j");
    auto zero = let("zero", Expr<u32>(slow) & Expr<u32>(step[ops::kStepZero]));  // 0, opaque to compilers
    if_(i < n, [&] { a[i] = Expr<u32>(in[i]) * 3u + Expr<u32>(step[ops::kStepEpoch]) + zero; });
    sync.signal(constant<u32>(ops::kPhaseCounterStride));
  }).else_([&] {
    sync.wait(constant<u32>(ops::kPhaseCounterStride), groups);
    auto i = let("i", (id - groups) * kWorkgroup + k.local_index());
    if_(i < n, [&] { out[i] = Expr<u32>(a[(i * 7u + 3u) % n]) + 1u; });
  });
  return k.build();
}

// Handed over through coherent buffers, then through the Vulkan memory model.
class PhaseSync : public DeviceTest, public testing::WithParamInterface<bool> {};

// Where workgroups start in order every wait reaches its target and the second phase reads what
// the first wrote. Elsewhere (lavapipe with several threads, whose loops also end after 65,535
// passes) a submission may give up instead: then the error word says so; never is a wrong
// answer left unflagged. The error word is checked before the data.
TEST_P(PhaseSync, TheSecondPhaseSeesEveryWorkgroupOfTheFirstOrReportsTheWait) {
  if (GetParam() && !ctx().info().vulkan_memory_model) GTEST_SKIP() << "the device has no Vulkan memory model";
  const bool in_order = workgroups_start_in_order();
  const uint32_t n = 4000, groups = (n + kWorkgroup - 1) / kWorkgroup;
  rt::Pipeline p = pipeline(two_phases(groups, GetParam()));
  std::vector<uint32_t> in(n);
  std::iota(in.begin(), in.end(), 5u);
  rt::Buffer ib = buffer_of(in, "in"), a(ctx(), n * 4, {false, "a"}), out(ctx(), n * 4, {false, "out"});
  rt::Buffer step(ctx(), sizeof(ops::StepState), {true, "step"});
  rt::Buffer counters = buffer_of(std::vector<uint32_t>(2 * ops::kPhaseCounterStride, 0u), "counters");
  rt::Graph g(ctx());
  g.dispatch(p, {step, counters, ib, a, out}, rt::push(n), rt::Grid{2 * groups});
  uint32_t gave_up = 0;
  for (uint32_t epoch = 1; epoch <= 4; ++epoch) {
    ops::StepState s;
    s.epoch = epoch;
    step.upload_bytes(std::as_bytes(std::span(&s, 1)));
    a.fill(0);
    g.submit_and_wait();
    auto c = counters.download<uint32_t>();
    EXPECT_EQ(c[ops::kPhaseCounterStride], epoch * groups);
    if (c[ops::kPhaseError] != 0) {
      EXPECT_FALSE(in_order) << "a wait gave up where workgroups start in order, epoch " << epoch;
      ++gave_up;
      c[ops::kPhaseError] = 0;  // as the model does before it runs the token again
      counters.upload(c);
      continue;
    }
    const auto got = out.download<uint32_t>();
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], in[(i * 7 + 3) % n] * 3 + epoch + 1) << "epoch " << epoch << " element " << i;
  }
  if (!in_order) std::cout << "[ out of order ] " << gave_up << " of 4 submissions gave up a wait\n";
}

INSTANTIATE_TEST_SUITE_P(Handoffs, PhaseSync, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& i) { return i.param ? "MemoryModel" : "Coherent"; });

}  // namespace
}  // namespace bdsl::test
