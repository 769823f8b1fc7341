// Decode attention alone at the 2B-4T shape (20/5 heads, head_dim 128, F16 KV cache of 4096
// positions) at several positions: GPU time per dispatch (each behind a barrier, the cache read
// from memory, not L2), GB/s of K/V read. Variants of the split-KV tuning knobs run beside the
// default so their effect is measured in the same run.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "bench/bench_registry.h"
#include "ops/attention.h"
#include "ops/common.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
namespace {

struct Variant {
  std::string name;
  ops::SplitKvTuning tuning;
  uint32_t chunks = 0;        // 0: ops::attention_chunks
  bool device_step = false;   // the step state in device memory instead of host memory (as the model has it)
};

void attention(benchmark::State& st, BenchSession& s, const ops::AttentionDims& d, uint32_t context, uint32_t pos,
               const Variant& v) {
  auto& ctx = *s.ctx;
  const uint32_t chunks = v.chunks ? v.chunks : ops::attention_chunks(s.target, d, context);
  rt::Pipeline p = rt::make_pipeline(
      ctx, ops::attention_split_kv("attention_decode_f16kv", s.target, d, context, chunks, false, v.tuning));
  // Several caches in turn, more than the L2 holds, so each dispatch reads its K/V from memory.
  constexpr int kCopies = 4, kDispatches = 64;
  const uint64_t cache_bytes = uint64_t{context} * d.kv_words() * 4;
  std::vector<rt::Buffer> k, vc;
  for (int i = 0; i < kCopies; ++i) {
    k.emplace_back(ctx, cache_bytes, rt::BufferOptions{false, "k cache"});
    vc.emplace_back(ctx, cache_bytes, rt::BufferOptions{false, "v cache"});
    k.back().fill(0x3c003c00u + uint32_t(i));  // ~1.0 halves: the values do not change the time
    vc.back().fill(0x3c003c00u);
  }
  rt::Buffer step(ctx, sizeof(ops::StepState), {!v.device_step, "step"}), q(ctx, d.q_width() * 4ull, {false, "q"});
  rt::Buffer out(ctx, d.q_width() * 4ull, {false, "out"});
  rt::Buffer partials(ctx, ops::attention_partials_bytes(d, chunks, 1), {false, "partials"});
  rt::Buffer counters(ctx, ops::attention_counters_bytes(d, 1), {false, "counters"});
  q.fill(0x3c000000u);
  counters.fill(0);
  ops::StepState state;
  state.pos = pos;
  step.upload(std::vector<ops::StepState>{state});
  rt::Graph g(ctx, {true, "attention"});
  for (int i = 0; i < kDispatches; ++i)  // each writes out: a barrier between them, as in a token
    g.dispatch(p, {step, q, k[i % kCopies], vc[i % kCopies], partials, counters, out},
               rt::Grid{d.n_kv_heads * ops::attention_head_split(d, v.tuning), chunks, 1});
  // The GPU raises its clocks only after a while of steady work: ~0.2 s of it before timing.
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200)) g.submit_and_wait();
  const double per = time_median_dispatch(st, g);
  const double bytes = double(pos + 1) * d.kv_width() * 2 * 2;
  st.counters["us"] = per / 1e3;
  st.counters["GB_per_s"] = bytes / per;
}

}  // namespace

void register_attention_benchmarks(BenchSession& s) {
  const bool quick = s.options.quick;
  const ops::AttentionDims d = quick ? ops::AttentionDims{8, 2, 64} : ops::AttentionDims{20, 5, 128};
  const uint32_t context = quick ? 512 : 4096;
  const std::vector<uint32_t> positions = quick ? std::vector<uint32_t>{100}
                                                : std::vector<uint32_t>{0, 100, 511, 2047, 4095};
  // The default is the model's: one workgroup per query head (DecodeTuning::attention_head_split).
  ops::SplitKvTuning model;
  model.head_split = d.group();
  std::vector<Variant> variants = {{"default", model, 0}};
  if (!quick) {
    ops::SplitKvTuning pass2 = model, pass4 = model, pass16 = model, lanes8 = model, whole;
    variants.push_back({"split:1", whole});
    pass2.positions_per_pass = 2;
    pass4.positions_per_pass = 4;
    pass16.positions_per_pass = 16;
    lanes8.max_lanes_per_row = 8;
    variants.push_back({"pass:2", pass2});
    variants.push_back({"pass:4", pass4});
    variants.push_back({"pass:16", pass16});
    variants.push_back({"chunks:4", model, 4});
    variants.push_back({"lanes:8", lanes8});
    variants.push_back({"chunks:32", model, 32});
    variants.push_back({"device_step", model, 0, true});
  }
  for (const auto& v : variants)
    for (uint32_t pos : positions)
      benchmark::RegisterBenchmark(fmt::format("attention/{}/pos:{}", v.name, pos).c_str(),
                                   [&s, d, context, pos, v](benchmark::State& st) { attention(st, s, d, context, pos, v); })
          ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
}

}  // namespace bdsl::bench
