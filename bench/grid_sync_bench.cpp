// What one device-wide barrier costs inside a single dispatch (every workgroup resident): the
// step a persistent kernel would pay between phases instead of a pipeline barrier (~2.2-3 us on
// an H100). `grid_sync/groups:G/rounds:R`: wall time of one dispatch of R rounds, per round.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>

#include "bench/bench_registry.h"
#include "dsl/dsl.h"
#include "ops/common.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
namespace {
using namespace dsl;

constexpr uint32_t kStride = 32;  // words between counters: one per 128-byte line

// Round r: every workgroup counts itself into counter r, then waits until all have (the epoch
// numbers submissions, so counters are never reset). A wait gives up after `limit` polls and
// sets word 0.
Kernel grid_sync_kernel(uint32_t workgroup, uint32_t limit) {
  KernelBuilder k("grid_sync_rounds", {workgroup, 1, 1});
  auto step = k.buffer<u32>("step", Access::Read);
  auto counters = k.volatile_buffer<u32>("counters", Access::ReadWrite);
  auto rounds = k.push<u32>("rounds");
  auto target = let("target", step[ops::kStepEpoch] * k.num_workgroups().x());
  for_range(constant<u32>(0), rounds, [&](Expr<u32> r) {
    memory_barrier_buffer();
    barrier();
    if_(k.local_index() == 0u, [&] {
      auto at = let("at", (r + 1u) * kStride);
      atomic_add(counters[at], 1u);
      auto spins = k.var<u32>("spins", 0u);
      loop([&] {
        if_(bitcast<i32>(Expr<u32>(counters[at]) - target) >= 0, [] { break_(); });
        spins += 1u;
        if_(Expr<u32>(spins) >= limit, [&] {
          atomic_or(counters[0u], 1u);
          break_();
        });
      });
    });
    barrier();
  }, "round");
  return k.build();
}

void grid_sync(benchmark::State& st, BenchSession& s, uint32_t groups, uint32_t rounds) {
  auto& ctx = *s.ctx;
  const uint32_t wg = std::min(256u, s.target.max_workgroup_invocations);
  rt::Pipeline p = rt::make_pipeline(ctx, grid_sync_kernel(wg, 1u << 22));
  rt::Buffer step(ctx, sizeof(ops::StepState), {true, "step"});
  rt::Buffer counters(ctx, 4ull * kStride * (rounds + 1), {false, "counters"});
  counters.fill(0);
  rt::Graph g(ctx, {false, "grid sync"});
  g.dispatch(p, {step, counters}, rt::push(rounds), rt::Grid{groups});
  time_epoch_submissions(st, g, step, rounds, std::chrono::milliseconds(200));
  if (counters.download<uint32_t>(0, 1)[0] != 0) st.SkipWithError("a wait gave up: the workgroups are not all resident");
}

}  // namespace

void register_grid_sync_benchmarks(BenchSession& s) {
  // Only where every workgroup can be resident at once: a GPU, not lavapipe's few threads.
  if (s.ctx->info().type == rt::DeviceType::Cpu && !s.options.quick) return;
  for (uint32_t groups : s.options.quick ? std::vector<uint32_t>{1} : std::vector<uint32_t>{132, 264})
    for (uint32_t rounds : s.options.quick ? std::vector<uint32_t>{4} : std::vector<uint32_t>{1, 256})
      benchmark::RegisterBenchmark(fmt::format("grid_sync/groups:{}/rounds:{}", groups, rounds).c_str(),
                                   [&s, groups, rounds](benchmark::State& st) { grid_sync(st, s, groups, rounds); })
          ->UseManualTime()->Iterations(s.options.quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
}

}  // namespace bdsl::bench
