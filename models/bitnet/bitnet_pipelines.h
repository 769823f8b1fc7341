// Every pipeline one BitNet token needs, built once for the model's shape and the device.
#pragma once
#include <optional>
#include <vector>

#include "codegen/shader_cache.h"
#include "models/bitnet_config.h"
#include "ops/attention.h"
#include "ops/head.h"
#include "ops/target.h"
#include "ops/ternary.h"
#include "runtime/context.h"
#include "runtime/pipeline.h"

namespace bdsl::bitnet {

// Overrides of the device's tuning (ops/tuning.h) for the decode kernels, to compare shapes on a
// device (bitnet-dsl-bench --matvec-rows, ...). 0: the tuning table's value.
struct DecodeTuning {
  uint32_t rows_per_subgroup = 0;  // the four norm-fused projections' (ops::MatvecOptions)
  uint32_t workgroup = 0;          // their workgroup size (0 here and in the table: 256)
  // One kernel's own shape, where set.
  uint32_t qkv_workgroup = 0, gate_up_workgroup = 0;
  uint32_t gate_up_rows_per_subgroup = 0;  // 0: rows_per_subgroup
  // attn_output's (it merges attention's deferred chunks in every workgroup: fewer, larger
  // workgroups merge them fewer times).
  uint32_t attn_output_workgroup = 0, attn_output_rows_per_subgroup = 0;
  // Attention leaves its chunk combine to attn_output's norm prologue where a token's positions
  // take 2 to attention_defer_chunks chunks (ops::SplitKvTuning::defer_combine).
  bool defer_attention_combine = true;
  uint32_t attention_defer_chunks = 0;
  uint32_t attention_positions_per_pass = 0;  // ops::SplitKvTuning::positions_per_pass
  uint32_t attention_head_split = 0;          // ops::SplitKvTuning::head_split (table 0: per query head)
};

struct BitNetPipelines {
  BitNetPipelines(rt::Context& ctx, const models::BitNetConfig& config, uint32_t top_k,
                  codegen::ShaderCache& cache = codegen::default_shader_cache(), const DecodeTuning& requested = {},
                  bool greedy_head = false, bool exact_norm_scale = false);

  ops::OpTarget target;
  DecodeTuning tuning;  // what was asked, with the tuning table's values where it asked nothing
  ops::AttentionDims dims;
  ops::LmHeadSplit split;
  ops::ArgmaxPlan argmax_plan;
  ops::TopKPlan top_k_plan;
  uint32_t top_k;  // 0: greedy only, no top-k dispatches
  uint32_t attention_chunks;
  // What attention was built with: with defer_combine, attn_output binds step, partials and
  // attn_used; attention's grid is n_kv_heads * head_split.
  ops::SplitKvTuning attention_tuning;
  ops::MatvecOptions residual_options, gate_up_options, qkv_options, attn_output_options;

  // Each with the grid it was planned with (ops/plan.h).
  ops::PlannedPipeline embedding;
  ops::PlannedPipeline qkv;            // attn_norm fused in front, RoPE + KV-cache write in the epilogue
  ops::PlannedPipeline rope_kv;        // prefill only
  ops::PlannedPipeline attention;
  // attn_output and ffn_down: their sub-norm fused in front (or, without sub-norms, the int8
  // quantization alone: no norm_weight binding, no eps), residual added after.
  ops::PlannedPipeline attn_output;
  ops::PlannedPipeline gate_up;        // ffn_norm fused in front, act(gate) * up after
  ops::PlannedPipeline ffn_down;
  ops::PlannedPipeline output_norm;
  ops::PlannedPipeline lm_head;
  ops::PlannedPipeline argmax_partial, argmax_final;
  // The decode graph's argmax_final: it also advances the step state to the next position with
  // its choice as the token, so greedy steps can follow each other with no host in between.
  ops::PlannedPipeline argmax_final_advance;
  // Greedy decoding's exact LM head from the int8 shadow (ops/head/lm_head_pruned.h), with greedy_head
  // where the shape allows it.
  std::optional<ops::PlannedPipeline> lm_head_input, lm_head_bounds, lm_head_candidates;
  // Derives the shadow from the F16 table, once at load; none where derives_shadow says the host
  // does it.
  std::optional<ops::PlannedPipeline> lm_head_shadow;
  // Whether the device derives the LM head's shadow (lm_head_shadow): not a CPU device (lavapipe),
  // where the host quantizes it faster than the device's emulation of the kernel (14 against 5.6 s
  // for the 2B shape).
  static bool derives_shadow(const rt::DeviceInfo& device) { return device.type != rt::DeviceType::Cpu; }
  std::optional<ops::PlannedPipeline> top_k_partial, top_k_merge;  // only when top_k > 0 (sampling)
  // With top_k: the decode graph's draw from the candidates (ops/head/sample_candidates.h), which
  // advances the step state instead of argmax_final (temperature 0 in its settings: the argmax).
  std::optional<ops::PlannedPipeline> sample_advance;
  // With top_k and greedy_head: decode_sampled's pruned head, the same draw from the rows that may
  // be among the k best (lm_head_candidate_list, then sample_candidate_list, which also advances
  // the step state and writes the next embedding).
  std::optional<ops::PlannedPipeline> lm_head_candidate_list, sample_list;
  // With top_k, once build_vocabulary ran: decode_sampled's draw over the whole vocabulary for
  // top_k 0 (ops/head/sample_vocabulary.h): a radix pass and a select each, the draw, which also
  // advances the step state and writes the next embedding.
  std::vector<ops::PlannedPipeline> vocab_mass_histogram, vocab_mass_select;
  std::optional<ops::PlannedPipeline> vocab_draw_partial, vocab_draw_final;
  // Builds the vocabulary draw's pipelines (above), at its first use rather than at load: most runs
  // never draw over the whole vocabulary, and each pipeline costs a compile (tens of ms of JIT on
  // lavapipe). Nothing without top_k or when they are built; `config` as the constructor's.
  void build_vocabulary(rt::Context& ctx, const models::BitNetConfig& config,
                        codegen::ShaderCache& cache = codegen::default_shader_cache());
  // Once build_repeat_penalty ran (at the first decode with a repeat penalty): the penalty on
  // every logit of the token's full head (ops/head/repeat_penalty.h).
  std::optional<ops::PlannedPipeline> repeat_penalty;
  void build_repeat_penalty(rt::Context& ctx, const models::BitNetConfig& config,
                            codegen::ShaderCache& cache = codegen::default_shader_cache());
};

}  // namespace bdsl::bitnet
