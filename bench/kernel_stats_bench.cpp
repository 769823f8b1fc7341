// What the driver says of each decode kernel and the prompt blocks' tensor-core projections
// (VK_KHR_pipeline_executable_properties: on NVIDIA
// the register count among others): `kernel/<name>`, the statistics as counters, no time. The
// registers decide how many workgroups fit on the GPU at once, which the fused decode layers
// (ops/experimental/decode_layer.h) and any persistent kernel depend on. Skipped where the device has none.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "bench/bench_registry.h"
#include "models/bitnet/bitnet_pipelines.h"
#include "models/bitnet/prefill_pipelines.h"
#include "models/formats/gguf.h"
#include "ops/attention.h"
#include "ops/experimental.h"
#include "ops/tuning.h"
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
  std::unique_ptr<bitnet::BitNetPipelines> separate;
  // ops/experimental/decode_layer.h (all four phases, ffn_down + next QKV, ffn_down alone as a
  // one-phase decode_layer) and persistent_chain/'s kernel with four phases: each handed over
  // through coherent buffers and through the Vulkan memory model (names ending _mm).
  std::vector<std::unique_ptr<rt::Pipeline>> experimental;
  std::vector<std::unique_ptr<rt::Pipeline>> prompt;  // the prompt blocks' tensor-core projections
  std::unique_ptr<bitnet::BlockProjections> one_lane;  // batched decode's one-lane bucket
  std::unique_ptr<rt::Pipeline> one_lane_attention;
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
  // With --exact-norm-scale, the kernels that normalize take the exact scale (their registers then).
  state->separate = std::make_unique<bitnet::BitNetPipelines>(*state->ctx, config, 0, codegen::default_shader_cache(),
                                                              bitnet::DecodeTuning{}, false, s.options.exact_norm_scale);
  const auto& p = *state->separate;
  // The fused decode layers with the separate kernels' shapes, as the model once recorded them.
  ops::MatvecOptions gate_up = p.gate_up_options;
  gate_up.workgroup = 0;  // the phases share one workgroup size
  const auto chain_options = persistent_chain_options(false);
  const bool memory_model = state->ctx->info().vulkan_memory_model;
  for (bool mm : {false, true}) {
    if (mm && !memory_model) break;
    const ops::DecodeLayerOptions layer_options{p.residual_options, gate_up, p.qkv_options, mm};
    auto add = [&](dsl::Kernel k) {
      state->experimental.push_back(std::make_unique<rt::Pipeline>(rt::make_pipeline(*state->ctx, std::move(k))));
    };
    // The fused layers normalize every phase's input and square the gate: BitNet b1.58's graph only.
    if (config.sub_norms && config.ffn_activation == models::FfnActivation::Relu2)
      for (auto [next_qkv, ffn_down_only] : {std::pair{true, false}, std::pair{true, true}, std::pair{false, true}}) {
        const ops::DecodeLayerShape shape{p.dims, config.dim, config.ffn_dim, config.context_length, next_qkv, ffn_down_only};
        add(ops::decode_layer(p.target, shape, layer_options));
      }
    add(ops::persistent_chain_kernel(p.target, chain_options, config.dim, 4,
                                     ops::ternary_matvec_workgroups(p.target, config.dim, chain_options), mm));
  }
  std::vector<const rt::Pipeline*> pipelines = {&p.embedding.pipeline, &p.qkv.pipeline, &p.attention.pipeline,
                                                &p.attn_output.pipeline, &p.gate_up.pipeline, &p.ffn_down.pipeline,
                                                &p.output_norm.pipeline, &p.lm_head.pipeline, &p.argmax_partial.pipeline};
  for (const auto& e : state->experimental) pipelines.push_back(e.get());
  if (ops::ternary_matmul_coopmat_shape(p.target))
    for (auto [rows, cols] : {std::pair{config.dim, config.dim}, std::pair{config.ffn_dim, config.dim}, std::pair{config.dim, config.ffn_dim}}) {
      const auto tile = ops::coop_tiles_for(p.target, rows, cols);
      state->prompt.push_back(std::make_unique<rt::Pipeline>(rt::make_pipeline(*state->ctx, ops::ternary_matmul_coopmat(p.target, rows, cols, tile))));
      pipelines.push_back(state->prompt.back().get());
    }
  // Batched decode's one-lane bucket (models/bitnet/batch_decoder.h), as BitNetBatchDecoder builds
  // it by default: the projections for steps of one token, attn_output merging the chunks the
  // attention for one sequence defers to it.
  {
    const uint32_t chunks = std::min(ops::tuning_for(p.target).sequences_attention_chunks, p.attention_chunks);
    ops::SplitKvTuning attention = p.attention_tuning;
    attention.whole_pass_chunks = true;
    attention.defer_combine = chunks;
    bitnet::ProjectionChoice choice{bitnet::PrefillProjections::Auto, 1};
    choice.rope_in_qkv = true;
    choice.attention_partials =
        ops::AttentionPartialsInput{p.dims, config.context_length, chunks, ops::attention_pass(p.target, p.dims, attention), chunks};
    choice.merging_attn_output_rows = p.tuning.attn_output_rows_per_subgroup;
    state->one_lane = std::make_unique<bitnet::BlockProjections>(*state->ctx, config, p.target, choice);
    state->one_lane_attention = std::make_unique<rt::Pipeline>(rt::make_pipeline(
        *state->ctx, ops::attention_decode_sequences(p.target, p.dims, config.context_length, chunks, attention, true)));
    const bitnet::BlockProjections& one = *state->one_lane;
    pipelines.insert(pipelines.end(), {one.qkv_rope ? &one.qkv_rope->pipeline : nullptr, state->one_lane_attention.get(),
                                       &one.attn_output.pipeline, one.gate_up ? &one.gate_up->pipeline : nullptr,
                                       &one.ffn_down.pipeline});  // absent ones are erased below
  }
  std::erase(pipelines, nullptr);
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
