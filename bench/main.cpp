// bitnet-dsl-bench: how fast bitnet-dsl is on this GPU and where each microsecond goes. Google
// Benchmark underneath, so --benchmark_filter, --benchmark_format=json and --benchmark_out work.
// Own flags: --quick (small shapes, seconds on lavapipe), --model FILE, --model-preset NAME, --device N|NAME,
// --prefill-projections auto|fused|separate (compare the two prefill layouts on one device),
// --matvec-rows N, --matvec-workgroup N (compare decode projection kernel shapes),
// --prefill-block N (the tokens of the prefill per-op table, 512 by default),
// --coop-tile-short|tall|deep RSxTSxRTxTT[,db|,kN|,r] (prompt blocks' tensor-core tiles, ops/tuning.h),
// --prefill-attention-plain (prompt blocks' attention on FMA only), --coop-attention-from POS and
// --coop-attention-chunk-tiles N (where prompt blocks attend on tensor cores, and in what chunks),
// --coop-gate-up fused|apart (prompt blocks' gate and up as one dispatch or two),
// --coop-attention-lean 0|1 (the tensor-core attention's lean softmax weights),
// --coop-attention-subgroups 1|2 (its subgroups per query head).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_registry.h"

namespace {

bdsl::bitnet::PrefillProjections prefill_projections(const std::string& v) {
  using P = bdsl::bitnet::PrefillProjections;
  if (v == "auto") return P::Auto;
  if (v == "fused") return P::Fused;
  if (v == "separate") return P::Separate;
  throw std::invalid_argument("--prefill-projections: auto, fused or separate, not " + v);
}

// A tensor-core tile as --coop-tile-* spell it: RSxTSxRTxTT (subgroups along rows and tokens,
// tiles per subgroup along rows and tokens), then ",db" for two shared-memory stages, ",kN" for
// the reduction split N ways or ",r" for operands read into the subgroups' fragments.
bdsl::ops::CoopTile coop_tile(const std::string& v) {
  bdsl::ops::CoopTile t;
  char rest[32] = "";
  const int n = std::sscanf(v.c_str(), "%ux%ux%ux%u%31s", &t.row_subgroups, &t.token_subgroups, &t.row_tiles, &t.token_tiles, rest);
  const std::string r = rest;
  unsigned splits = 0;
  if (n < 4 || !(r.empty() || r == ",db" || r == ",r" || (std::sscanf(rest, ",k%u", &splits) == 1 && splits > 0)))
    throw std::invalid_argument("--coop-tile-*: RSxTSxRTxTT[,db|,kN|,r], not " + v);
  t.double_buffer = r == ",db";
  t.register_operands = r == ",r";
  if (splits) t.k_splits = splits;
  return t;
}

// --coop-gate-up: whether prompt blocks' gate and up run fused (one dispatch) or apart.
bool gate_up_layout(const std::string& v) {
  if (v == "fused") return true;
  if (v == "apart") return false;
  throw std::invalid_argument("--coop-gate-up: fused or apart, not " + v);
}

// A 0|1 switch.
bool on_off(const std::string& flag, const std::string& v) {
  if (v == "1") return true;
  if (v == "0") return false;
  throw std::invalid_argument(flag + ": 0 or 1, not " + v);
}

// Takes this program's own flags out of argv, leaving Google Benchmark's.
bdsl::bench::BenchOptions take_own_flags(int& argc, char** argv) {
  bdsl::bench::BenchOptions o;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") o.quick = true;
    else if (a == "--model") o.model = value();
    else if (a == "--model-preset") o.model_preset = value();
    else if (a == "--device") o.device = value();
    else if (a == "--prefill-projections") o.prefill_projections = prefill_projections(value());
    else if (a == "--batch-subgroup-max") o.batch.subgroup_max_tokens = uint32_t(std::stoul(value()));
    else if (a == "--batch-coop-rows") o.batch.coop_row_subgroups = uint32_t(std::stoul(value()));
    else if (a == "--batch-coop-tokens") o.batch.coop_token_subgroups = uint32_t(std::stoul(value()));
    else if (a == "--batch-f32-head") o.batch.tensor_core_head = false;
    else if (a == "--batch-full-head") o.batch.pruned_head = false;
    else if (a == "--batch-prompt-lanes") o.batch.prompt_lanes = uint32_t(std::stoul(value()));
    else if (a == "--batch-norm-fused-max") o.batch.norm_fused_max_tokens = std::stoi(value());
    else if (a == "--batch-coop-double-buffer") o.batch.coop_double_buffer = int(std::stoul(value()));
    else if (a == "--batch-attention-chunks") o.batch.attention_chunks = uint32_t(std::stoul(value()));
    else if (a == "--batch-attention-head-split") o.batch.attention_head_split = uint32_t(std::stoul(value()));
    else if (a == "--batch-attention-spread") o.batch.attention_spread_lanes = uint32_t(std::stoul(value()));
    else if (a == "--batch-attention-per-workgroup") o.batch.attention_chunks_per_workgroup = uint32_t(std::stoul(value()));
    else if (a == "--batch-attention-spread-split") o.batch.attention_spread_head_split = uint32_t(std::stoul(value()));
    else if (a == "--batch-attention-positions") o.batch.attention_positions_per_pass = uint32_t(std::stoul(value()));
    else if (a == "--batch-attention-combined") o.batch.defer_attention_combine = false;
    else if (a == "--batch-merging-rows") o.batch.merging_attn_output_rows = uint32_t(std::stoul(value()));
    else if (a == "--batch-rows") o.batch.step_rows_per_subgroup = uint32_t(std::stoul(value()));
    else if (a == "--batch-norm-tile") o.batch.step_norm_tile = uint32_t(std::stoul(value()));
    else if (a == "--batch-coop-split") o.batch.coop_blocks_per_split = std::stoi(value());
    else if (a == "--matvec-rows") o.decode_tuning.rows_per_subgroup = uint32_t(std::stoul(value()));
    else if (a == "--matvec-workgroup") o.decode_tuning.workgroup = uint32_t(std::stoul(value()));
    else if (a == "--qkv-workgroup") o.decode_tuning.qkv_workgroup = uint32_t(std::stoul(value()));
    else if (a == "--gate-up-workgroup") o.decode_tuning.gate_up_workgroup = uint32_t(std::stoul(value()));
    else if (a == "--gate-up-rows") o.decode_tuning.gate_up_rows_per_subgroup = uint32_t(std::stoul(value()));
    else if (a == "--attn-output-workgroup") o.decode_tuning.attn_output_workgroup = uint32_t(std::stoul(value()));
    else if (a == "--attn-output-rows") o.decode_tuning.attn_output_rows_per_subgroup = uint32_t(std::stoul(value()));
    else if (a == "--attention-head-split") o.decode_tuning.attention_head_split = uint32_t(std::stoul(value()));
    else if (a == "--attention-positions-per-pass") o.decode_tuning.attention_positions_per_pass = uint32_t(std::stoul(value()));
    else if (a == "--attention-defer") {
      o.decode_tuning.attention_defer_chunks = uint32_t(std::stoul(value()));
      o.decode_tuning.defer_attention_combine = o.decode_tuning.attention_defer_chunks > 0;
    }
    else if (a == "--prefill-block") o.prefill_block = uint32_t(std::stoul(value()));
    else if (a == "--prefill-attention-plain") o.tensor_core_attention = false;
    else if (a == "--tokens-per-replay") o.tokens_per_replay = uint32_t(std::stoul(value()));
    else if (a == "--coop-tile-short") o.coop_tile_short = coop_tile(value());
    else if (a == "--coop-tile-tall") o.coop_tile_tall = coop_tile(value());
    else if (a == "--coop-tile-deep") o.coop_tile_deep = coop_tile(value());
    else if (a == "--memory-model-handoffs") o.memory_model_handoffs = true;
    else if (a == "--exact-norm-scale") o.exact_norm_scale = true;
    else if (a == "--coop-split-max-groups") o.coop_split_max_workgroups = uint32_t(std::stoul(value()));
    else if (a == "--coop-split-max-tokens") o.coop_split_max_tokens = uint32_t(std::stoul(value()));
    else if (a == "--coop-attention-from") o.coop_attention_from = uint32_t(std::stoul(value()));
    else if (a == "--coop-attention-chunk-tiles") o.coop_attention_chunk_tiles = uint32_t(std::stoul(value()));
    else if (a == "--coop-gate-up") o.coop_gate_up_fused = gate_up_layout(value());
    else if (a == "--coop-attention-lean") o.coop_attention_lean = on_off("--coop-attention-lean", value());
    else if (a == "--coop-attention-subgroups") o.coop_attention_subgroups = uint32_t(std::stoul(value()));
    else if (a == "--help" || a == "-h") {
      std::printf("usage: bitnet-dsl-bench [--quick] [--model FILE.gguf | --model-preset NAME] [--device N|NAME]\n"
                  "                        [--prefill-projections auto|fused|separate] [--prefill-block N]\n"
                  "                        [--prefill-attention-plain] [--tokens-per-replay N]\n"
                  "                        [--matvec-rows N] [--matvec-workgroup N] [--qkv-workgroup N]\n"
                  "                        [--gate-up-workgroup N] [--gate-up-rows N] [--attention-head-split N]\n"
                  "                        [--attention-positions-per-pass N] [--attention-defer N]\n"
                  "                        [--attn-output-workgroup N] [--attn-output-rows N]\n"
                  "                        [--batch-subgroup-max N] [--batch-coop-rows N] [--batch-coop-tokens N]\n"
                  "                        [--batch-f32-head] [--batch-full-head] [--batch-attention-chunks N]\n"
                  "                        [--batch-coop-double-buffer 0|1] [--batch-attention-head-split N]\n"
                  "                        [--batch-attention-positions N] [--batch-prompt-lanes N]\n"
                  "                        [--batch-norm-fused-max N] [--batch-rows N] [--batch-norm-tile N]\n"
                  "                        [--batch-coop-split N] [--coop-split-max-groups N]\n"
                  "                        [--coop-split-max-tokens N]\n"
                  "                        [--batch-attention-spread N]\n"
                  "                        [--batch-attention-per-workgroup N] [--batch-attention-spread-split N]\n"
                  "                        [--coop-tile-short T] [--coop-tile-tall T] [--coop-tile-deep T]\n"
                  "                        [--memory-model-handoffs] [--exact-norm-scale]\n"
                  "                        [--coop-attention-from POS] [--coop-attention-chunk-tiles N]\n"
                  "                        [--coop-gate-up fused|apart] [--coop-attention-lean 0|1]\n"
                  "                        [--coop-attention-subgroups 1|2]\n"
                  "                        [--benchmark_...]\n"
                  "  default model: a synthetic BitNet b1.58 of the real 2B-4T shape (made once in the cache)\n"
                  "  --model-preset: another synthetic shape (make-model's presets: llama3-8b, falcon3-10b, ...)\n"
                  "  --quick: the tiny model and small shapes (seconds on lavapipe)\n"
                  "  --prefill-projections: QKV and gate/up in prefill as one dispatch each (fused) or one\n"
                  "    per tensor (separate, tensor cores where the device has them); auto: the model's choice\n"
                  "  the decode kernel shapes below default to the device's row of ops/tuning.h (0: the same)\n"
                  "  --matvec-rows, --matvec-workgroup: rows per subgroup and workgroup size of the decode\n"
                  "    projections; --qkv-workgroup, --gate-up-workgroup, --gate-up-rows: one kernel's own;\n"
                  "    --attn-output-workgroup, --attn-output-rows: attn_output's own\n"
                  "  --attention-head-split: workgroups per KV head in decode attention, each serving that\n"
                  "    share of its query heads\n"
                  "  --attention-positions-per-pass: K/V positions each row group reads per pass\n"
                  "  --attention-defer: up to how many chunks attn_output combines itself (0: none)\n"
                  "  --prefill-block: tokens of the block the prefill_op/ table times (default 512)\n"
                  "  --prefill-attention-plain: prompt blocks' attention on FMA only (not on tensor cores)\n"
                  "  --coop-attention-from, --coop-attention-chunk-tiles: prompt blocks attend on tensor cores\n"
                  "    from this position on; their K/V tiles a position chunk (0: one chunk) (ops/tuning.h)\n"
                  "  --coop-gate-up: prompt blocks' gate and up on tensor cores as one dispatch writing\n"
                  "    act(gate) * up (fused) or two whose product ffn_sub_norm's quantize forms (apart)\n"
                  "  --coop-attention-lean: the tensor-core attention's softmax weights by a multiply and\n"
                  "    F16 halves by truncation (1) or by a division and rounding (0)\n"
                  "  --coop-attention-subgroups: the tensor-core attention's subgroups per query head, each\n"
                  "    taking that share of a K/V tile's keys and of head_dim (1 or 2)\n"
                  "  --tokens-per-replay: decode_greedy/decode_sampled tokens a submission (default 8; 1: one)\n"
                  "  --coop-tile-short, --coop-tile-tall, --coop-tile-deep: prompt blocks' tensor-core tile\n"
                  "    (RSxTSxRTxTT[,db|,kN]: subgroups along rows and tokens, tiles per subgroup, two stages\n"
                  "    or the reduction split N ways)\n"
                  "    of Q/K/V/attn_output, gate/up and ffn_down\n"
                  "  --memory-model-handoffs: workgroups hand partials over through the Vulkan memory model,\n"
                  "    not coherent buffers (ops/common/handoff.h)\n"
                  "  --exact-norm-scale: RMSNorm's scale at bitnet.cpp's rounding points (ModelOptions::\n"
                  "    exact_norm_scale, ops/common/norm_scale.h), to measure what it costs\n"
                  "  batched decode (decode_batch/, serve/), 0 or absent: ops/tuning.h's choice:\n"
                  "  --batch-subgroup-max: steps of up to N tokens run the subgroup matmul, larger ones the\n"
                  "    tensor cores; --batch-coop-rows, --batch-coop-tokens: the tensor-core tile's subgroups\n"
                  "    along the rows (16 rows each) and across the step's tokens; --batch-coop-double-buffer:\n"
                  "    its two-stage variant (1) or not (0)\n"
                  "  --batch-f32-head: the LM head as lm_head_batch (f32 x) instead of on tensor cores, and the\n"
                  "    pruned head's bounds per sequence instead of on int8 tensor cores\n"
                  "  --batch-full-head: greedy outputs from the full LM head's argmax, not the pruned head\n"
                  "  --batch-attention-chunks: each sequence's positions in at most N chunks;\n"
                  "    --batch-attention-head-split: workgroups per KV head; --batch-attention-positions:\n"
                  "    positions each row group reads per pass; --batch-attention-per-workgroup: chunks each\n"
                  "    workgroup takes in buckets of more than --batch-attention-spread lanes, and\n"
                  "    --batch-attention-spread-split the workgroups per KV head of the others (the same bits;\n"
                  "    without it, a one-lane bucket whose attn_output merges takes the decode graph's split)\n"
                  "  --batch-attention-combined: attention combines its chunks in the kernel, not in the next\n"
                  "    step (attn_output or attn_sub_norm's quantize; the same bits); --batch-merging-rows:\n"
                  "    the rows per subgroup of an attn_output that merges (default: the decode graph's)\n"
                  "  --batch-prompt-lanes: prompt tokens a step carries beside its streams (serve/; 0:\n"
                  "    every prompt in blocks between steps)\n"
                  "  --batch-norm-fused-max: buckets of up to N lanes normalize inside the projections\n"
                  "    (-1: never); --batch-rows: rows per subgroup of their projections past one lane\n"
                  "    (but QKV and a merging attn_output); --batch-norm-tile: their tokens a workgroup\n"
                  "  --batch-coop-split: blocks of 128 columns a workgroup of the tensor-core steps'\n"
                  "    projections, the reduction split between workgroups (0: no split);\n"
                  "    --coop-split-max-groups: only projections of at most N workgroups split (0: any);\n"
                  "    --coop-split-max-tokens: only in steps of at most N tokens\n");
      benchmark::PrintDefaultHelp();
      std::exit(0);
    } else argv[out++] = argv[i];
  }
  argc = out;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto options = take_own_flags(argc, argv);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    bdsl::bench::BenchSession session(options);
    bdsl::bench::register_bandwidth_benchmarks(session);
    bdsl::bench::register_matvec_benchmarks(session);
    bdsl::bench::register_projection_benchmarks(session);
    bdsl::bench::register_grid_sync_benchmarks(session);
    bdsl::bench::register_persistent_chain_benchmarks(session);
    bdsl::bench::register_decode_layer_chain_benchmarks(session);
    bdsl::bench::register_matmul_benchmarks(session);
    bdsl::bench::register_coop_probe_benchmarks(session);
    bdsl::bench::register_attention_benchmarks(session);
    bdsl::bench::register_attention_prefill_benchmarks(session);
    bdsl::bench::register_model_benchmarks(session);
    bdsl::bench::register_batch_benchmarks(session);
    bdsl::bench::register_startup_benchmarks(session);
    bdsl::bench::register_kernel_stats_benchmarks(session);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bitnet-dsl-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
