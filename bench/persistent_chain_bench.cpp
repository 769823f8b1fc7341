// What a decode step would cost in a persistent kernel: P projections one after another inside
// one dispatch, every workgroup taking part in every phase and waiting for all of them between
// phases (ops/experimental/phase_sync.h counters), against the same P projections as barrier-separated
// dispatches of the standalone kernel. The projection is attn_output's shape (2560 x 2560,
// attn_sub_norm fused, the default rows per subgroup; no residual: each phase normalizes what
// the one before wrote). `persistent_chain/<variant>/phases:P`: wall time per projection over a
// graph of kDispatches x P projections, submit included. A GPU only: it needs every workgroup
// resident at once (with --quick on lavapipe: one workgroup).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

#include "bench/bench_registry.h"
#include "dsl/dsl.h"
#include "ops/common.h"
#include "ops/experimental.h"
#include "ops/ternary.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
using namespace dsl;

// --quick (lavapipe): 4 rows per subgroup, so that one workgroup covers the 128 rows.
ops::MatvecOptions persistent_chain_options(bool quick) {
  ops::MatvecOptions o;
  o.input = ops::MatvecInput::NormalizeInWorkgroup;
  if (quick) o.rows_per_subgroup = 4;
  return o;
}

namespace {

constexpr int kDispatches = 8;

// How the phases hand over: barrier-separated dispatches, or one dispatch through coherent
// buffers or through the Vulkan memory model (ops/experimental/phase_sync.h).
enum class Chain { Barriers, Coherent, MemoryModel };

void persistent_chain(benchmark::State& st, BenchSession& s, uint32_t dim, uint32_t phases, Chain chain) {
  auto& ctx = *s.ctx;
  const bool persistent = chain != Chain::Barriers;
  const ops::MatvecOptions o = persistent_chain_options(s.options.quick);
  const uint32_t groups = ops::ternary_matvec_workgroups(s.target, dim, o);
  rt::Pipeline p = persistent ? rt::make_pipeline(ctx, ops::persistent_chain_kernel(s.target, o, dim, phases, groups,
                                                                                    chain == Chain::MemoryModel))
                              : rt::make_pipeline(ctx, ops::ternary_matvec(s.target, dim, dim, o));
  // One weight copy per phase (more than the L2 holds across the chain), two activation buffers.
  std::vector<rt::Buffer> weights;
  for (uint32_t i = 0; i < phases; ++i) {
    weights.emplace_back(ctx, uint64_t{dim} * dim / 4 + 32, rt::BufferOptions{false, "weights"});
    weights.back().fill(0x55555555);  // code 1 (zero) everywhere: the values do not change the time
  }
  rt::Buffer xa(ctx, dim * 4ull, {false, "x a"}), xb(ctx, dim * 4ull, {false, "x b"}), nw(ctx, dim * 4ull, {false, "norm weight"});
  xa.fill(0x3f800000);
  xb.fill(0x3f800000);
  nw.fill(0x3f800000);
  const rt::Buffer* x[2] = {&xa, &xb};
  rt::Buffer step(ctx, sizeof(ops::StepState), {true, "step"});
  const uint32_t words_per_dispatch = ops::kPhaseCounterStride * phases;
  rt::Buffer counters(ctx, 4ull * (ops::kPhaseCounterStride + uint64_t{words_per_dispatch} * kDispatches), {true, "counters"});
  counters.upload(std::vector<uint32_t>(counters.size() / 4, 0u));
  rt::Graph g(ctx, {false, "persistent chain"});
  for (int d = 0; d < kDispatches; ++d) {
    if (persistent) {
      std::vector<rt::BufferSlice> b = {step, counters};
      std::vector<uint32_t> handed_off;  // later phases read and write x a and x b again: aliased on purpose
      for (uint32_t i = 0; i < phases; ++i) {
        if (i > 0) handed_off.insert(handed_off.end(), {uint32_t(b.size() + 1), uint32_t(b.size() + 3)});
        b.insert(b.end(), {weights[i], *x[i % 2], nw, *x[(i + 1) % 2]});
      }
      g.dispatch(p, b, rt::push(1e-5f, ops::kPhaseCounterStride + d * words_per_dispatch), rt::Grid{groups}, handed_off);
    } else {
      for (uint32_t i = 0; i < phases; ++i)
        g.dispatch(p, {weights[i], *x[i % 2], nw, *x[(i + 1) % 2]}, rt::push(1e-5f), rt::Grid{groups});
    }
  }
  const double per = time_epoch_submissions(st, g, step, kDispatches * phases, std::chrono::milliseconds(300));
  st.counters["us_per_projection"] = per / 1e3;
  st.counters["workgroups"] = groups;
  st.counters["steps"] = persistent ? kDispatches : kDispatches * phases;
  if (persistent && counters.download<uint32_t>(0, 1)[0] != 0)
    st.SkipWithError("a phase wait gave up: the workgroups are not all resident on this device");
}

}  // namespace

void register_persistent_chain_benchmarks(BenchSession& s) {
  // Every workgroup resident at once: a GPU, or lavapipe with one workgroup (--quick).
  if (s.ctx->info().type == rt::DeviceType::Cpu && !s.options.quick) return;
  const uint32_t dim = s.options.quick ? 128 : 2560;
  if (s.ctx->info().type == rt::DeviceType::Cpu && ops::ternary_matvec_workgroups(s.target, dim, persistent_chain_options(true)) > 1) return;
  for (uint32_t phases : s.options.quick ? std::vector<uint32_t>{2} : std::vector<uint32_t>{2, 4})
    for (auto [chain, name] : {std::pair{Chain::Barriers, "barriers"}, std::pair{Chain::Coherent, "one_dispatch"},
                               std::pair{Chain::MemoryModel, "one_dispatch_memory_model"}}) {
      if (chain == Chain::MemoryModel && !s.ctx->info().vulkan_memory_model) continue;
      benchmark::RegisterBenchmark(fmt::format("persistent_chain/{}/phases:{}", name, phases).c_str(),
                                   [&s, dim, phases, chain](benchmark::State& st) { persistent_chain(st, s, dim, phases, chain); })
          ->UseManualTime()->Iterations(s.options.quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
    }
}

}  // namespace bdsl::bench
