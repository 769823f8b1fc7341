// Every pipeline one BitNet token needs, built once for the model's shape and the device.
#pragma once
#include <optional>

#include "codegen/shader_cache.h"
#include "models/bitnet_config.h"
#include "ops/head/argmax.h"
#include "ops/attention/attention_split_kv.h"
#include "ops/attention/attention_dims.h"
#include "ops/head/lm_head.h"
#include "ops/target.h"
#include "ops/ternary/ternary_matvec.h"
#include "ops/head/top_k.h"
#include "runtime/context.h"
#include "runtime/pipeline.h"

namespace bdsl::bitnet {

// The decode projections' kernel shape (ops::MatvecOptions): rows per subgroup and workgroup
// size of the four norm-fused projections; 0 keeps each one's default. For comparing shapes on
// a device (bitnet-dsl-bench --matvec-rows / --matvec-workgroup).
struct DecodeTuning {
  uint32_t rows_per_subgroup = 0;
  uint32_t workgroup = 0;
  // The same for QKV and gate/up alone, where set.
  // gate/up: 128 invocations (864 lighter workgroups); H100, two A/B pairs in one run:
  // decode_greedy 715-716 vs 707-708 tokens/s at ctx 512 (bench/RESULTS.md run 7).
  uint32_t qkv_workgroup = 0, gate_up_workgroup = 128;
  uint32_t gate_up_rows_per_subgroup = 0;  // 0: rows_per_subgroup
  // attn_output's own shape, where set (it merges attention's deferred chunks in every
  // workgroup: fewer, larger workgroups merge them fewer times). 0: as ffn_down.
  // 4 rows per subgroup (80 workgroups): H100, alternating in one call, decode_greedy 852-854 vs
  // 836-841 tokens/s at ctx 512 with 2 (bench/RESULTS.md run 10; 2 was better before the
  // projections read whole words, run 8).
  uint32_t attn_output_workgroup = 0, attn_output_rows_per_subgroup = 4;
  // Attention leaves its chunk combine to attn_output's norm prologue where a token's positions
  // take 2 to 4 chunks (ops::SplitKvTuning::defer_combine).
  bool defer_attention_combine = true;
  uint32_t attention_defer_chunks = 4;  // up to how many chunks' combine attn_output does
  // Positions each row group of attention reads per pass (ops::SplitKvTuning::positions_per_pass).
  uint32_t attention_positions_per_pass = 8;
  // Workgroups per KV head in decode attention (ops::SplitKvTuning::head_split); 0: one per query
  // head. H100, 2B shape (4 query heads a KV head), one run: attention 9.9 / 7.4 / 7.0 us with
  // 1 / 2 / 4, decode_greedy 670 / 703 / 714 tokens/s at ctx 512.
  uint32_t attention_head_split = 0;
};

struct BitNetPipelines {
  BitNetPipelines(rt::Context& ctx, const models::BitNetConfig& config, uint32_t top_k,
                  codegen::ShaderCache& cache = codegen::default_shader_cache(), const DecodeTuning& tuning = {},
                  bool greedy_head = false);

  ops::OpTarget target;
  ops::AttentionDims dims;
  ops::LmHeadSplit split;
  ops::ArgmaxPlan argmax_plan;
  ops::TopKPlan top_k_plan;
  uint32_t top_k;  // 0: greedy only, no top-k dispatches
  uint32_t attention_chunks;
  // What attention was built with: with defer_combine, attn_output binds step, partials and
  // attn_used; attention's grid is n_kv_heads * head_split.
  ops::SplitKvTuning attention_tuning;
  ops::MatvecOptions residual_options, gate_up_options, qkv_options, attn_output_options;  // the grids need them too

  rt::Pipeline embedding;
  rt::Pipeline qkv;            // attn_norm fused in front, RoPE + KV-cache write in the epilogue
  rt::Pipeline rope_kv;        // prefill only
  rt::Pipeline attention;
  rt::Pipeline attn_output;    // attn_sub_norm fused in front, residual added after
  rt::Pipeline gate_up;        // ffn_norm fused in front, relu(gate)^2 * up after
  rt::Pipeline ffn_down;       // ffn_sub_norm fused in front, residual added after
  rt::Pipeline output_norm;
  rt::Pipeline lm_head;
  rt::Pipeline argmax_partial, argmax_final;
  // The decode graph's argmax_final: it also advances the step state to the next position with
  // its choice as the token, so greedy steps can follow each other with no host in between.
  rt::Pipeline argmax_final_advance;
  // Greedy decoding's exact LM head from the int8 shadow (ops/head/lm_head_pruned.h), with greedy_head
  // where the shape allows it.
  std::optional<rt::Pipeline> lm_head_input, lm_head_bounds, lm_head_candidates;
  std::optional<rt::Pipeline> top_k_partial, top_k_merge;  // only when top_k > 0 (sampling)
};

}  // namespace bdsl::bitnet
