// lavapipe (Mesa's gallivm) ends every loop of a shader invocation after 65,535 passes in all,
// silently: a loop that should run 100,000 passes stops early and the kernel goes on with what
// it has. Kernels whose loops may run that long (a phase wait, ops/experimental/phase_sync.h) must not take
// "the loop ended" for "the loop's condition held". This test pins the behaviour down: exact
// counts on every other device, the truncation on lavapipe (if a Mesa update lifts the limit, the
// test says so, and docs/driver-notes.md can be brought up to date).
#include "device_test.h"

namespace bdsl::test {
namespace {
using namespace dsl;

Kernel count_passes() {
  KernelBuilder k("count_passes", {1, 1, 1});
  auto out = k.buffer<u32>("out", Access::Write);
  auto n = k.push<u32>("n");
  auto passes = k.var<u32>("passes", 0u);
  loop([&] {
    passes += 1u;
    if_(Expr<u32>(passes) >= n, [] { break_(); });
  });
  out[0u] = Expr<u32>(passes);
  return k.build();
}

class LoopPassLimit : public DeviceTest {};

TEST_F(LoopPassLimit, LongLoopsRunToTheEndExceptOnLavapipe) {
  rt::Pipeline p = pipeline(count_passes());
  rt::Buffer out(ctx(), 4, {false, "out"});
  for (uint32_t n : {1000u, 65000u, 100000u, 1000000u}) {
    rt::Graph g(ctx());
    g.dispatch(p, {out}, rt::push(n), rt::Grid{1});
    g.submit_and_wait();
    const uint32_t got = out.download<uint32_t>()[0];
    const bool lavapipe = ctx().info().name.find("llvmpipe") != std::string::npos;
    if (lavapipe && n > 65535)
      EXPECT_LT(got, n) << "lavapipe ran all " << n << " passes: its loop limit is gone (docs/driver-notes.md)";
    else
      EXPECT_EQ(got, n) << ctx().info().name;
  }
}

}  // namespace
}  // namespace bdsl::test
