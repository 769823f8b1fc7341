// What the driver says of each decode kernel (VK_KHR_pipeline_executable_properties: on NVIDIA
// the register count among others): `kernel/<name>`, the statistics as counters, no time. The
// registers decide how many workgroups fit on the GPU at once, which the fused decode layers
// (ops/experimental/decode_layer.h) and any persistent kernel depend on. Skipped where the device has none.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cctype>
#include <memory>

#include "bench/bench_registry.h"
#include "models/formats/gguf.h"
#include "models/bitnet/bitnet_pipelines.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
namespace {

// Counter names: the driver's statistic names with letters, digits and '_' only.
std::string counter_name(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

struct StatsState {
  std::unique_ptr<rt::Context> ctx;
  std::unique_ptr<bitnet::BitNetPipelines> separate, fused, fused_down;
  std::unique_ptr<rt::Pipeline> down_alone;  // ffn_down as a one-phase decode_layer
  std::unique_ptr<rt::Pipeline> chain;       // persistent_chain/'s kernel, four phases
};

}  // namespace

void register_kernel_stats_benchmarks(BenchSession& s) {
  if (s.options.quick || !s.ctx->info().pipeline_statistics) return;
  // Their own context: statistics capture may keep a driver from using its pipeline caches.
  auto state = std::make_shared<StatsState>();
  rt::ContextOptions o;
  o.device = s.options.device;
  o.pipeline_statistics = true;
  o.save_pipeline_cache = false;
  state->ctx = std::make_unique<rt::Context>(o);
  const auto file = models::GgufFile::open(s.model_path);
  const auto config = models::BitNetConfig::from_gguf(file);
  state->separate = std::make_unique<bitnet::BitNetPipelines>(*state->ctx, config, 0);
  state->fused = std::make_unique<bitnet::BitNetPipelines>(*state->ctx, config, 0, codegen::default_shader_cache(),
                                                           bitnet::DecodeTuning{}, bitnet::FusedLayers::All);
  state->fused_down = std::make_unique<bitnet::BitNetPipelines>(*state->ctx, config, 0, codegen::default_shader_cache(),
                                                                bitnet::DecodeTuning{}, bitnet::FusedLayers::FfnDownQkv);
  ops::DecodeLayerShape alone{state->fused->dims, config.dim, config.ffn_dim, config.context_length, false, true};
  state->down_alone = std::make_unique<rt::Pipeline>(
      rt::make_pipeline(*state->ctx, ops::decode_layer(state->fused->target, alone, state->fused->layer_options)));
  const auto chain_options = persistent_chain_options(false);
  state->chain = std::make_unique<rt::Pipeline>(rt::make_pipeline(
      *state->ctx, persistent_chain_kernel(state->fused->target, chain_options, config.dim, 4,
                                           ops::ternary_matvec_workgroups(state->fused->target, config.dim, chain_options))));
  const auto& p = *state->separate;
  std::vector<const rt::Pipeline*> pipelines = {&p.embedding, &p.qkv, &p.attention, &p.attn_output, &p.gate_up, &p.ffn_down,
                                                &p.output_norm, &p.lm_head, &p.argmax_partial, &*state->fused->layer,
                                                &*state->fused_down->layer, state->down_alone.get(), state->chain.get()};
  for (const rt::Pipeline* pipeline : pipelines)
    benchmark::RegisterBenchmark(fmt::format("kernel/{}", pipeline->name()).c_str(),
                                 [state, pipeline](benchmark::State& st) {
                                   for (auto _ : st) st.SetIterationTime(1e-9);
                                   for (const auto& stat : pipeline->statistics())
                                     st.counters[counter_name(stat.name)] = stat.value;
                                 })
        ->UseManualTime()->Iterations(1);
}

}  // namespace bdsl::bench
