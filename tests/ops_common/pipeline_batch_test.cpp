// Pipelines built together on threads (ops::PipelineBatch): each one the kernel it was given
// (every pipeline runs its own saxpy constant against the CPU), into plain and optional slots,
// and a kernel the device cannot run fails the batch with an error naming that kernel.
#include <optional>
#include <string>
#include <vector>

#include "device_test.h"
#include "ops/pipeline_batch.h"

namespace bdsl::test {
namespace {

using namespace bdsl::dsl;

// y = a x + y with its own a (a kernel of its own, so a cache entry and a driver compile each).
dsl::Kernel scaled_add(float a) {
  KernelBuilder k("scaled_add_" + std::to_string(int(a)), {64, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto i = k.global_id().x();
  y[i] = Expr<f32>(y[i]) + a * Expr<f32>(x[i]);
  return k.build();
}

class PipelineBatch : public DeviceTest {};

TEST_F(PipelineBatch, EachPipelineIsTheKernelItWasGivenWhereverItGoes) {
  const uint32_t n = 64, kernels = 12;
  std::vector<ops::PlannedPipeline> plain(kernels / 2);
  std::vector<std::optional<ops::PlannedPipeline>> optional(kernels / 2);
  ops::PipelineBatch batch;
  for (uint32_t i = 0; i < kernels; ++i) {
    ops::Plan plan{scaled_add(float(i + 1)), ops::fixed_grid({1})};
    if (i % 2)
      batch.add(std::move(plan), optional[i / 2]);
    else
      batch.add(std::move(plan), plain[i / 2]);
  }
  codegen::ShaderCache cache(std::nullopt);  // in memory: every kernel compiles here
  batch.build(ctx(), cache, 4);
  EXPECT_EQ(cache.stats().misses, kernels);
  std::vector<float> x(n), y0(n);
  for (uint32_t j = 0; j < n; ++j) x[j] = float(j), y0[j] = 0.5f * float(j);
  for (uint32_t i = 0; i < kernels; ++i) {
    const ops::PlannedPipeline& p = i % 2 ? *optional[i / 2] : plain[i / 2];
    rt::Buffer xb = buffer_of(x, "x"), yb = buffer_of(y0, "y");
    rt::Graph g(ctx());
    p.dispatch(g, {{"x", xb}, {"y", yb}});
    g.submit_and_wait();
    const auto y = yb.download<float>();
    for (uint32_t j = 0; j < n; ++j) ASSERT_EQ(y[j], y0[j] + float(i + 1) * x[j]) << "kernel " << i << " element " << j;
  }
}

TEST_F(PipelineBatch, AKernelTheDeviceCannotRunFailsTheBatchNamingIt) {
  std::vector<ops::PlannedPipeline> ok(3);
  ops::PipelineBatch batch;
  for (uint32_t i = 0; i < 3; ++i) batch.add({scaled_add(float(i + 1)), ops::fixed_grid({1})}, ok[i]);
  KernelBuilder k("too_much_shared", {64, 1, 1});
  auto big = k.shared<f32>("big", ctx().info().max_shared_memory / 4 + 1024);
  auto y = k.buffer<f32>("y", Access::Write);
  big[k.local_index()] = 1.0f;
  barrier();
  y[k.local_index()] = big[0u];
  ops::PlannedPipeline bad;
  batch.add({k.build(), ops::fixed_grid({1})}, bad);
  codegen::ShaderCache cache(std::nullopt);
  try {
    batch.build(ctx(), cache, 2);
    FAIL() << "a kernel over the device's shared memory was built";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("too_much_shared"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bdsl::test
