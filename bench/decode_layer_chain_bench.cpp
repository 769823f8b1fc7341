// What fusing a decode layer's projections would be worth now: the model's layers without
// attention (attn_output, gate/up, ffn_down, the next QKV with RoPE and the cache write) over all
// its layers, each layer's weights its own, recorded three ways:
//   separate        the four standalone kernels behind pipeline barriers (the shapes the model runs);
//   down_qkv        attn_output and gate/up apart, ffn_down + next QKV as one dispatch;
//   fused           all four as one dispatch (ops/experimental/decode_layer.h);
// the fused two handed over through coherent buffers or, `_memory_model`, through the Vulkan
// memory model (ops/experimental/phase_sync.h). `decode_layer_chain/<variant>`: wall time per
// layer, submit included. A GPU only (the phases need their workgroups resident in order).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

#include "bench/bench_registry.h"
#include "models/bitnet/bitnet_pipelines.h"
#include "models/formats/gguf.h"
#include "ops/common.h"
#include "ops/experimental.h"
#include "ops/ternary.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
namespace {

enum class Layout { Separate, DownQkv, Fused };

struct LayerWeights {
  rt::Buffer o, gate, up, down, q, k, v;
};

void decode_layer_chain(benchmark::State& st, BenchSession& s, Layout layout, bool memory_model) {
  auto& ctx = *s.ctx;
  const auto file = models::GgufFile::open(s.model_path);
  const auto config = models::BitNetConfig::from_gguf(file);
  const bitnet::BitNetPipelines p(ctx, config, 0);
  const auto& d = p.dims;
  const uint32_t layers = config.n_layers, dim = config.dim, ffn = config.ffn_dim;
  ops::MatvecOptions gate_up = p.gate_up_options;
  if (layout != Layout::Separate) gate_up.workgroup = 0;  // the phases share one workgroup size
  const ops::DecodeLayerOptions options{p.residual_options, gate_up, p.qkv_options, memory_model};

  auto weights = [&](uint32_t rows, uint32_t cols, const char* name) {
    rt::Buffer b(ctx, uint64_t{rows} * cols / 4 + 32, rt::BufferOptions{false, name});
    b.fill(0x55555555);  // code 1 (zero) everywhere: the values do not change the time
    return b;
  };
  std::vector<LayerWeights> w;
  for (uint32_t l = 0; l < layers; ++l)
    w.push_back({weights(dim, d.q_width(), "attn_output"), weights(ffn, dim, "gate"), weights(ffn, dim, "up"),
                 weights(dim, ffn, "down"), weights(d.q_width(), dim, "q"), weights(d.kv_width(), dim, "k"),
                 weights(d.kv_width(), dim, "v")});
  auto ones = [&](uint32_t n, const char* name) {
    rt::Buffer b(ctx, n * 4ull, {false, name});
    b.fill(0x3f800000);
    return b;
  };
  rt::Buffer attn = ones(d.q_width(), "attention out"), x = ones(dim, "residual"), h = ones(ffn, "ffn"),
             q = ones(d.q_width(), "q"), n_sub = ones(d.q_width(), "attn_sub_norm"), n_ffn = ones(dim, "ffn_norm"),
             n_ffn_sub = ones(ffn, "ffn_sub_norm"), n_attn = ones(dim, "attn_norm");
  const uint64_t cache_bytes = uint64_t{config.context_length} * d.kv_words() * 4;
  rt::Buffer k_cache(ctx, cache_bytes, {false, "k cache"}), v_cache(ctx, cache_bytes, {false, "v cache"});
  rt::Buffer table(ctx, uint64_t{config.context_length} * d.head_dim * 4, {false, "rope table"});
  table.fill(0x3f800000);
  rt::Buffer step(ctx, sizeof(ops::StepState), {true, "step"});
  rt::Buffer counters(ctx, 4ull * (ops::kPhaseCounterStride + uint64_t{ops::decode_layer_counter_words()} * layers),
                      {true, "counters"});
  counters.upload(std::vector<uint32_t>(counters.size() / 4, 0u));

  const float eps = 1e-5f;
  const ops::Plan out = ops::plan_ternary_matvec(p.target, dim, d.q_width(), options.residual);
  const ops::Plan gu = ops::plan_ternary_matvec_gate_up(p.target, ffn, dim, ops::GateActivation::Relu2, gate_up);
  const ops::Plan down = ops::plan_ternary_matvec(p.target, dim, ffn, options.residual);
  const ops::Plan qkv = ops::plan_ternary_matvec_qkv_rope(p.target, d, dim, config.context_length, options.qkv);
  rt::Pipeline p_out = rt::make_pipeline(ctx, out.kernel), p_gu = rt::make_pipeline(ctx, gu.kernel),
               p_down = rt::make_pipeline(ctx, down.kernel), p_qkv = rt::make_pipeline(ctx, qkv.kernel);
  const ops::DecodeLayerShape shape{d, dim, ffn, config.context_length, true, layout == Layout::DownQkv};
  std::unique_ptr<ops::Plan> fused;
  std::unique_ptr<rt::Pipeline> p_fused;
  if (layout != Layout::Separate) {
    fused = std::make_unique<ops::Plan>(ops::plan_decode_layer(p.target, shape, options));
    p_fused = std::make_unique<rt::Pipeline>(rt::make_pipeline(ctx, fused->kernel));
  }

  rt::Graph g(ctx, {false, "decode layer chain"});
  for (uint32_t l = 0; l < layers; ++l) {
    const LayerWeights& lw = w[l];
    const LayerWeights& next = w[(l + 1) % layers];
    const uint32_t base = ops::kPhaseCounterStride + l * ops::decode_layer_counter_words();
    if (layout != Layout::Fused) {
      g.dispatch(p_out, {lw.o, attn, n_sub, x}, rt::push(eps), out.grid());
      g.dispatch(p_gu, {lw.gate, lw.up, x, n_ffn, h}, rt::push(eps), gu.grid());
    }
    if (layout == Layout::Separate) {
      g.dispatch(p_down, {lw.down, h, n_ffn_sub, x}, rt::push(eps), down.grid());
      g.dispatch(p_qkv, {next.q, next.k, next.v, x, n_attn, step, table, q, k_cache, v_cache}, rt::push(eps), qkv.grid());
    } else if (layout == Layout::DownQkv) {
      // The phases read and write the residual stream through bindings of their own: aliased on purpose.
      const rt::BufferSlice b[] = {step, counters, lw.down, h, n_ffn_sub, x, next.q, next.k, next.v, x, n_attn, table, q,
                                   k_cache, v_cache};
      const uint32_t aliased[] = {9};
      g.dispatch(*p_fused, b, rt::push(eps, base), fused->grid(), aliased);
    } else {
      const rt::BufferSlice b[] = {step, counters, lw.o, attn, n_sub, x, lw.gate, lw.up, x, n_ffn, h, lw.down,
                                   h, n_ffn_sub, x, next.q, next.k, next.v, x, n_attn, table, q, k_cache, v_cache};
      const uint32_t aliased[] = {8, 12, 14, 18};
      g.dispatch(*p_fused, b, rt::push(eps, base), fused->grid(), aliased);
    }
  }
  const double per = time_epoch_submissions(st, g, step, layers, std::chrono::milliseconds(300));
  st.counters["us_per_layer"] = per / 1e3;
  st.counters["dispatches"] = g.stats().dispatches;
  if (layout != Layout::Separate && counters.download<uint32_t>(0, 1)[0] != 0)
    st.SkipWithError("a phase wait gave up: the workgroups did not start in order on this device");
}

}  // namespace

void register_decode_layer_chain_benchmarks(BenchSession& s) {
  // The phases wait on each other: a GPU only. The fused phases are BitNet b1.58's (sub-norms, relu²).
  if (s.ctx->info().type == rt::DeviceType::Cpu || s.options.quick) return;
  const auto config = models::BitNetConfig::from_gguf(models::GgufFile::open(s.model_path));
  if (!config.sub_norms || config.ffn_activation != models::FfnActivation::Relu2) return;
  for (auto [layout, name] : {std::pair{Layout::Separate, "separate"}, std::pair{Layout::DownQkv, "down_qkv"},
                              std::pair{Layout::Fused, "fused"}})
    for (bool mm : {false, true}) {
      if ((layout == Layout::Separate && mm) || (mm && !s.ctx->info().vulkan_memory_model)) continue;
      benchmark::RegisterBenchmark(fmt::format("decode_layer_chain/{}{}", name, mm ? "_memory_model" : "").c_str(),
                                   [&s, layout, mm](benchmark::State& st) { decode_layer_chain(st, s, layout, mm); })
          ->UseManualTime()->Iterations(50)->Unit(benchmark::kMicrosecond);
    }
}

}  // namespace bdsl::bench
