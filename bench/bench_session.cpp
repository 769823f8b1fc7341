#include "bench/bench_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <span>

#include "codegen/shader_cache.h"
#include "golden/synthetic_model.h"
#include "ops/common.h"
#include "ops/examples.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {

double measure_peak_read(rt::Context& ctx, uint64_t bytes, int repeats, double* best_ns) {
  const auto target = ops::OpTarget::from(ctx.info());
  bytes = std::min<uint64_t>(bytes, std::min(ctx.info().max_storage_buffer_range, ctx.info().max_memory_allocation));
  bytes &= ~uint64_t{15};
  rt::Buffer data(ctx, bytes, {false, "stream data"});
  data.fill(0x01020304);
  const uint32_t groups = 4096;
  rt::Buffer out(ctx, groups * 4, {false, "stream out"});
  rt::Pipeline p = rt::make_pipeline(ctx, ops::stream_read(target));
  rt::Graph g(ctx, {true, "stream_read"});
  g.dispatch(p, {data, out}, rt::push(uint32_t(bytes / 16)), rt::Grid{groups});
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    g.submit_and_wait();
    best = std::min(best, g.span_ns());
  }
  if (best_ns) *best_ns = best;
  return double(bytes) / best;  // bytes per ns = GB/s
}

L2Eviction::L2Eviction(rt::Context& ctx)
    : data_(ctx, 256ull << 20, {false, "eviction data"}),
      out_(ctx, 4096 * 4, {false, "eviction out"}),
      pipeline_(rt::make_pipeline(ctx, ops::stream_read(ops::OpTarget::from(ctx.info())))) {
  data_.fill(1);
}

void L2Eviction::record(rt::Graph& g) const {
  g.dispatch(pipeline_, {data_, out_}, rt::push(uint32_t(data_.size() / 16)), rt::Grid{4096});
}

double time_median_dispatch(benchmark::State& st, rt::Graph& g, uint32_t every) {
  double per = 0;
  for (auto _ : st) {
    g.submit_and_wait();
    const auto all = g.timestamps_ns();
    std::vector<double> ns;
    for (size_t i = every - 1; i < all.size(); i += every) ns.push_back(all[i]);
    std::sort(ns.begin(), ns.end());
    per = ns[ns.size() / 2];
    st.SetIterationTime(per * 1e-9);
  }
  return per;
}

double time_epoch_submissions(benchmark::State& st, rt::Graph& g, rt::Buffer& step, double units,
                              std::chrono::milliseconds warmup) {
  uint32_t epoch = 0;
  auto submit = [&] {
    ops::StepState state;
    state.epoch = ++epoch;
    step.upload_bytes(std::as_bytes(std::span(&state, 1)));
    g.submit_and_wait();
  };
  for (const auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < warmup;) submit();
  double per = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    submit();
    per = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / units;
    st.SetIterationTime(per * 1e-9);
  }
  return per;
}

BenchSession::BenchSession(const BenchOptions& o) : options(o) {
  rt::ContextOptions copts;
  copts.device = o.device;
  ctx = std::make_unique<rt::Context>(copts);
  if (!ctx->info().timestamps) throw std::runtime_error("device '" + ctx->info().name + "' has no GPU timestamps");
  target = ops::with_exact_norm_scale(ops::OpTarget::from(ctx->info()), o.exact_norm_scale);
  if (o.coop_tile_short || o.coop_tile_tall || o.coop_tile_deep || o.memory_model_handoffs || o.coop_split_max_workgroups || o.coop_split_max_tokens ||
      o.coop_attention_from || o.coop_attention_chunk_tiles || o.coop_gate_up_fused || o.coop_attention_lean ||
      o.coop_attention_subgroups) {
    ops::Tuning t = ops::tuning_for(target);
    if (o.coop_attention_lean) t.prefill_coopmat_attention_lean_weights = *o.coop_attention_lean;
    if (o.coop_attention_subgroups) t.prefill_coopmat_attention_subgroups_per_head = *o.coop_attention_subgroups;
    if (o.coop_gate_up_fused) t.coop_gate_up_fused = *o.coop_gate_up_fused;
    if (o.coop_attention_from) t.prefill_coopmat_attention_from = *o.coop_attention_from;
    if (o.coop_attention_chunk_tiles) t.prefill_coopmat_attention_chunk_tiles = *o.coop_attention_chunk_tiles;
    if (o.coop_split_max_tokens) t.step_coop_split_max_tokens = *o.coop_split_max_tokens;
    if (o.coop_split_max_workgroups) t.step_coop_split_max_workgroups = *o.coop_split_max_workgroups;
    if (o.memory_model_handoffs) t.memory_model_handoffs = true;
    if (o.coop_tile_short) t.coop_tile_short = *o.coop_tile_short;
    if (o.coop_tile_tall) t.coop_tile_tall = *o.coop_tile_tall;
    if (o.coop_tile_deep) t.coop_tile_deep = *o.coop_tile_deep;
    ops::override_tuning(t);
  }
  // The fragment order, probed as the model's start-up does: where the tiles ask for register operands.
  if (ops::asks_register_operands(ops::tuning_for(target))) target = ops::with_probed_fragments(*ctx, target);
  std::fprintf(stderr, "device: %s\n", ctx->info().summary().c_str());
  std::fprintf(stderr, "RMSNorm scale: %s\n", ops::norm_scale_exact(target) ? "bitnet.cpp's (--exact-norm-scale)" : "f32 (the default)");
  peak_read_gbps = measure_peak_read(*ctx, o.quick ? (64ull << 20) : (1ull << 30), o.quick ? 3 : 10);
  std::fprintf(stderr, "peak read bandwidth (stream_read, %s): %.0f GB/s\n", o.quick ? "64 MiB" : "1 GiB",
               peak_read_gbps);
  if (!o.model.empty()) {
    model_path = o.model;
    return;
  }
  // Speed does not depend on the weights' values: a synthetic model of the real shape will do.
  const std::string preset = !o.model_preset.empty() ? o.model_preset : o.quick ? "tiny" : "2b";
  golden::synthetic_preset(preset);  // an unknown name fails here, naming the known ones
  model_path = codegen::default_cache_dir() / "bench" / fmt::format("bitnet-{}-synthetic.gguf", preset);
  if (!std::filesystem::exists(model_path)) {
    std::fprintf(stderr, "writing the synthetic %s model to %s ...\n", preset.c_str(), model_path.c_str());
    std::filesystem::create_directories(model_path.parent_path());
    golden::write_synthetic_model(golden::synthetic_preset(preset), model_path);
  }
}

}  // namespace bdsl::bench
