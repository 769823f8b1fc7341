// What every benchmark of bitnet-dsl-bench shares: the device, the measured peak read bandwidth
// and the model (a synthetic one of the real 2B-4T shape by default, the tiny one with --quick).
#pragma once
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "models/formats/gguf.h"
#include "models/bitnet/batch_decoder.h"
#include "models/bitnet/bitnet_pipelines.h"
#include "models/bitnet/prefill_pipelines.h"
#include "ops/target.h"
#include "ops/tuning.h"
#include "runtime/buffer.h"
#include "runtime/context.h"
#include "runtime/graph.h"
#include "runtime/pipeline.h"

#include <benchmark/benchmark.h>

namespace bdsl::bench {

struct BenchOptions {
  bool quick = false;         // small shapes: seconds on lavapipe (CI runs this)
  std::string model;          // a GGUF file; empty: the synthetic model of the preset
  std::string model_preset;   // golden::synthetic_preset's name; empty: 2b (tiny with quick)
  std::string device;
  bitnet::PrefillProjections prefill_projections = bitnet::PrefillProjections::Auto;  // to compare layouts
  bool tensor_core_attention = true;  // prompt blocks' attention on tensor cores where it pays
  uint32_t tokens_per_replay = 0;     // ModelOptions::tokens_per_replay (0: its default)
  bitnet::DecodeTuning decode_tuning;  // to compare decode kernel shapes
  uint32_t prefill_block = 512;         // tokens of the prefill per-op table (not with --quick)
  bitnet::BatchOptions batch;           // to compare batched-decode kernel choices
  // Prompt blocks' tensor-core tiles in place of the tuning table's (ops::override_tuning).
  std::optional<ops::CoopTile> coop_tile_short, coop_tile_tall, coop_tile_deep;
  bool memory_model_handoffs = false;  // ops/tuning.h's memory_model_handoffs
  bool exact_norm_scale = false;       // ModelOptions::exact_norm_scale (and the op/ kernels')
  std::optional<uint32_t> coop_split_max_workgroups;  // ops/tuning.h's step_coop_split_max_workgroups
  std::optional<uint32_t> coop_split_max_tokens;      // ops/tuning.h's step_coop_split_max_tokens
  std::optional<uint32_t> coop_attention_from;        // ops/tuning.h's prefill_coopmat_attention_from
  std::optional<uint32_t> coop_attention_chunk_tiles;  // ... prefill_coopmat_attention_chunk_tiles
  std::optional<bool> coop_gate_up_fused;              // ops/tuning.h's coop_gate_up_fused
  std::optional<bool> coop_attention_lean;             // ... prefill_coopmat_attention_lean_weights
  std::optional<uint32_t> coop_attention_subgroups;    // ... prefill_coopmat_attention_subgroups_per_head
};

struct BenchSession {
  explicit BenchSession(const BenchOptions& options);

  BenchOptions options;
  std::unique_ptr<rt::Context> ctx;
  ops::OpTarget target;
  std::filesystem::path model_path;
  double peak_read_gbps = 0;  // measured by the stream_read probe, before anything else
  // State benchmarks keep between runs (the loaded models, one per variant the model benchmarks
  // build); declared after ctx so it dies first.
  std::map<int, std::shared_ptr<void>> model_states;
};

// A read of 256 MB to record in front of a kernel under test: no code or data of it is left in the
// L2 then, as in a model's graph where other kernels run in between (bench/RESULTS.md run 40: the
// tensor-core prompt attention alone 52 us, after such a read 66-68, in the graph 78).
class L2Eviction {
 public:
  explicit L2Eviction(rt::Context& ctx);
  void record(rt::Graph& g) const;

 private:
  rt::Buffer data_, out_;
  rt::Pipeline pipeline_;
};

// Runs the recorded graph once per benchmark iteration and reports the median dispatch's GPU time
// (each dispatch of such graphs is one copy of the kernel being measured; with `every` N, each
// N-th operation is, the others set it up); returns it in ns.
double time_median_dispatch(benchmark::State& st, rt::Graph& g, uint32_t every = 1);

// For graphs whose phases wait on counters (ops/experimental/phase_sync.h): submits `g` with the step state's
// epoch advanced each time, for `warmup` first (the GPU clocks down between benchmarks), then once
// per iteration, and reports the wall time per submission divided by `units`; returns it in ns.
double time_epoch_submissions(benchmark::State& st, rt::Graph& g, rt::Buffer& step, double units,
                              std::chrono::milliseconds warmup);

// Measures the peak read bandwidth (GB/s) with ops::stream_read over `bytes`.
double measure_peak_read(rt::Context& ctx, uint64_t bytes, int repeats, double* best_ns = nullptr);

}  // namespace bdsl::bench
