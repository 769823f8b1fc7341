// Prefill attention alone at the 2B-4T shape (20/5 heads, head_dim 128, F16 KV cache of 4096
// positions): GPU time per dispatch for a block of n tokens at position pos (median of a barrier
// chain). The tiled kernel in several tilings runs beside the split-KV kernel it replaced (one
// workgroup per token, kv head and chunk) and the F16 tensor-core kernel (with the tuning table's
// position chunks, and with 1, 2, 8 or 16; its softmax weights lean or rounded; one or two
// subgroups per query head), so the gain is measured in the same run. q and the cache hold one
// value throughout, or (`_varied`) F16 values that differ, as a model's do. `_evicted` runs each
// dispatch after a 256 MB read (no code or data left in L2, as in a model's graph where other
// kernels run in between); `_evicted_data_copied` then copies q, K and V in afresh (data in L2).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <bit>
#include <chrono>
#include <optional>

#include "bench/bench_registry.h"
#include "golden/splitmix.h"
#include "models/numerics/half_float.h"
#include "ops/attention.h"
#include "ops/common.h"
#include "ops/tuning.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
namespace {

struct PrefillVariant {
  std::string name;
  bool split_kv = false;               // the previous kernel
  ops::PrefillAttentionLayout layout;  // lanes 0: the target's default
  bool tensor_cores = false;           // attention_prefill_coopmat
  uint32_t coop_chunks = 0;            // its position chunks (0: the tuning table's)
  std::optional<bool> lean_weights;    // its lean softmax weights on or off (none: the tuning table's)
  uint32_t subgroups = 0;              // its subgroups per query head (0: the table's)
  bool random_data = false;            // q, K and V of varied F16 values (else all alike)
  // Before each dispatch: nothing, a read of 256 MB (the L2's code and data gone, as in a model's
  // graph), or that read and then fresh copies of q, K and V (the data in L2 again, the code not).
  enum Cold { Warm, Evicted, EvictedDataCopied } cold = Warm;
};

// The tensor-core kernel as the table builds it, or with lean weights on or off, or its subgroups
// per query head set.
dsl::Kernel coop_kernel(const ops::OpTarget& target, const ops::AttentionDims& d, uint32_t context,
                        const PrefillVariant& v) {
  ops::Tuning t = ops::tuning_for(target);
  if (v.lean_weights) t.prefill_coopmat_attention_lean_weights = *v.lean_weights;
  if (v.subgroups) t.prefill_coopmat_attention_subgroups_per_head = v.subgroups;
  const ops::ScopedTuning scoped(t);
  return ops::attention_prefill_coopmat(target, d, context);
}

// F16 values of magnitude [1/4, 4) and either sign from a seed: scores that differ, as a model's
// do. As F16 pairs (the cache) or as f32 words holding F16 values (q).
uint16_t varied_half(golden::SplitMix64& rng) {
  const uint64_t r = rng.next();
  return uint16_t((r >> 63) << 15 | (13 + (r >> 40) % 4) << 10 | r % 1024);
}
std::vector<uint32_t> varied_words(uint64_t words, bool pairs, uint64_t seed) {
  golden::SplitMix64 rng(seed);
  std::vector<uint32_t> out(words);
  for (auto& w : out)
    w = pairs ? varied_half(rng) | uint32_t(varied_half(rng)) << 16 : std::bit_cast<uint32_t>(numerics::f16_to_f32(varied_half(rng)));
  return out;
}

void attention_prefill(benchmark::State& st, BenchSession& s, const ops::AttentionDims& d, uint32_t context,
                       uint32_t pos, uint32_t n, const PrefillVariant& v) {
  auto& ctx = *s.ctx;
  const uint32_t chunks = ops::attention_chunks(s.target, d, context);
  const auto layout = v.layout.lanes ? v.layout : ops::attention_prefill_layout(s.target, d);
  if (!v.split_kv && !v.tensor_cores && ops::attention_prefill_shared_bytes(d, layout) > s.target.max_shared_bytes) {
    st.SkipWithError("tiling needs more shared memory than the device has");
    return;
  }
  rt::Pipeline p = rt::make_pipeline(
      ctx, v.tensor_cores ? coop_kernel(s.target, d, context, v)
           : v.split_kv   ? ops::attention_split_kv("attention_prefill_split_kv", s.target, d, context, chunks, true)
                          : ops::attention_prefill(s.target, d, context, layout));
  const uint32_t table_chunks = ops::attention_prefill_coopmat_chunks(s.target, n, pos);  // as the model records it
  const auto g3 = v.tensor_cores ? ops::attention_prefill_coopmat_grid(s.target, d, n, v.coop_chunks ? v.coop_chunks : table_chunks)
                                 : ops::attention_prefill_grid(d, layout, n);
  const uint32_t coop_chunks = g3[0] / d.n_kv_heads;
  const rt::Grid grid = v.split_kv ? rt::Grid{d.n_kv_heads, chunks, n} : rt::Grid{g3[0], g3[1], g3[2]};
  const uint64_t cache_bytes = uint64_t{context} * d.kv_words() * 4;
  rt::Buffer k(ctx, cache_bytes, {false, "k cache"}), vc(ctx, cache_bytes, {false, "v cache"});
  if (v.random_data) {
    k.upload(varied_words(cache_bytes / 4, true, 1));
    vc.upload(varied_words(cache_bytes / 4, true, 2));
  } else {
    k.fill(0x3c003c00u);  // ~1.0 halves
    vc.fill(0x3c003c00u);
  }
  rt::Buffer step(ctx, sizeof(ops::StepState), {true, "step"}), q(ctx, uint64_t{n} * d.q_width() * 4, {false, "q"});
  rt::Buffer out(ctx, uint64_t{n} * d.q_width() * 4, {false, "out"});
  rt::Buffer partials(ctx, v.split_kv       ? ops::attention_partials_bytes(d, chunks, n)
                           : v.tensor_cores ? ops::attention_prefill_coopmat_partials_bytes(d, n, coop_chunks)
                                            : ops::attention_prefill_partials_bytes(d, layout, n, g3[2]),
                      {false, "partials"});
  rt::Buffer counters(ctx, v.split_kv       ? ops::attention_counters_bytes(d, n)
                           : v.tensor_cores ? ops::attention_prefill_coopmat_counters_bytes(d, n)
                                            : ops::attention_prefill_counters_bytes(d, layout, n),
                      {false, "counters"});
  if (v.random_data)
    q.upload(varied_words(uint64_t{n} * d.q_width(), false, 3));
  else
    q.fill(0x3c000000u);
  counters.fill(0);
  ops::StepState state;
  state.pos = pos;
  step.upload(std::vector<ops::StepState>{state});
  constexpr int kDispatches = 16;
  rt::Graph g(ctx, {true, "attention prefill"});
  std::optional<rt::Buffer> q_src, k_src, v_src;
  std::optional<L2Eviction> eviction;
  if (v.cold != PrefillVariant::Warm) eviction.emplace(ctx);
  if (v.cold == PrefillVariant::EvictedDataCopied) {
    q_src.emplace(ctx, q.size(), rt::BufferOptions{false, "q source"});
    k_src.emplace(ctx, cache_bytes, rt::BufferOptions{false, "k source"});
    v_src.emplace(ctx, cache_bytes, rt::BufferOptions{false, "v source"});
    rt::Graph copy(ctx, {false, "sources"});
    copy.copy(q, *q_src);
    copy.copy(k, *k_src);
    copy.copy(vc, *v_src);
    copy.submit_and_wait();
  }
  const uint32_t ops_per = q_src ? 5 : eviction ? 2 : 1;  // graph operations per attention dispatch, the attention last
  for (int i = 0; i < kDispatches; ++i) {
    if (eviction) eviction->record(g);
    if (q_src) {
      g.copy(*q_src, q);
      g.copy(*k_src, k);
      g.copy(*v_src, vc);
    }
    g.dispatch(p, {step, q, k, vc, partials, counters, out}, rt::push(n), grid);
  }
  const auto t0 = std::chrono::steady_clock::now();  // clocks up first
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200)) g.submit_and_wait();
  const double per = time_median_dispatch(st, g, ops_per);
  // Causal pairs (query row, position) times head_dim, two products each (Q K^T and P V).
  double pairs = 0;
  for (uint32_t t = 0; t < n; ++t) pairs += pos + t + 1;
  st.counters["us"] = per / 1e3;
  st.counters["GFLOP_per_s"] = pairs * d.n_heads * d.head_dim * 4 / per;
}

}  // namespace

void register_attention_prefill_benchmarks(BenchSession& s) {
  const bool quick = s.options.quick;
  const ops::AttentionDims d = quick ? ops::AttentionDims{8, 2, 64} : ops::AttentionDims{20, 5, 128};
  const uint32_t context = quick ? 512 : 4096;
  struct Block { uint32_t pos, n; };
  const std::vector<Block> blocks = quick ? std::vector<Block>{{0, 16}}
                                          : std::vector<Block>{{0, 512}, {512, 512}, {3584, 512}, {0, 64}, {2000, 16}};
  std::vector<PrefillVariant> variants = {{"tiled", false, {0, 0, 0}}};
  if (!quick) {
    variants.push_back({"tiled_varied", false, {0, 0, 0}, false, 0, std::nullopt, 0, true});
    variants.push_back({"tiled_evicted", false, {0, 0, 0}, false, 0, std::nullopt, 0, false, PrefillVariant::Evicted});
    variants.push_back({"tiled_evicted_data_copied", false, {0, 0, 0}, false, 0, std::nullopt, 0, false,
                        PrefillVariant::EvictedDataCopied});
    variants.push_back({"split_kv", true, {}});
    if (ops::attention_prefill_coopmat_supported(s.target, d)) {
      variants.push_back({"tensor_cores", false, {}, true});
      for (uint32_t chunks : {1u, 2u, 8u, 16u})
        variants.push_back({fmt::format("tensor_cores_c{}", chunks), false, {}, true, chunks});
      variants.push_back({"tensor_cores_lean", false, {}, true, 0, true});
      variants.push_back({"tensor_cores_rounded", false, {}, true, 0, false});
      for (const uint32_t subgroups : {1u, 2u}) {
        const std::string name = fmt::format("tensor_cores_sg{}", subgroups);
        variants.push_back({name, false, {}, true, 0, std::nullopt, subgroups});
        variants.push_back({name + "_varied", false, {}, true, 0, std::nullopt, subgroups, true});
        variants.push_back({name + "_evicted", false, {}, true, 0, std::nullopt, subgroups, false, PrefillVariant::Evicted});
        variants.push_back({name + "_evicted_data_copied", false, {}, true, 0, std::nullopt, subgroups, false,
                            PrefillVariant::EvictedDataCopied});
      }
    }
    for (auto [lanes, keys, tokens] : {std::array<uint32_t, 3>{32, 1, 8}, {16, 1, 16}, {8, 2, 16}, {16, 2, 4}})
      variants.push_back({fmt::format("tiled_l{}_k{}_t{}", lanes, keys, tokens), false, {lanes, keys, tokens}});
  }
  for (const auto& v : variants)
    for (const Block b : blocks)
      benchmark::RegisterBenchmark(fmt::format("attention_prefill/{}/pos:{}/n:{}", v.name, b.pos, b.n).c_str(),
                                   [&s, d, context, b, v](benchmark::State& st) {
                                     attention_prefill(st, s, d, context, b.pos, b.n, v);
                                   })
          ->UseManualTime()->Iterations(quick ? 2 : 10)->Unit(benchmark::kMicrosecond);
}

}  // namespace bdsl::bench
