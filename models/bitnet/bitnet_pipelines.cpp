#include "models/bitnet/bitnet_pipelines.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "ops/attention.h"
#include "ops/common.h"
#include "ops/head.h"
#include "ops/pipeline_batch.h"
#include "ops/ternary.h"
#include "ops/tuning.h"
#include "models/bitnet/graph_traits.h"
#include "models/sampler.h"

namespace bdsl::bitnet {
namespace {

// `t` with one kernel's own workgroup size and rows per subgroup, where it has them.
DecodeTuning own_workgroup(DecodeTuning t, uint32_t workgroup, uint32_t rows = 0) {
  if (workgroup) t.workgroup = workgroup;
  if (rows) t.rows_per_subgroup = rows;
  return t;
}

DecodeTuning with_table(DecodeTuning t, const ops::Tuning& table, const ops::OpTarget& target, const models::BitNetConfig& c) {
  auto fill = [](uint32_t& v, uint32_t from_table) {
    if (!v) v = from_table;
  };
  if (c.dim >= table.wide_model_dim && target.max_workgroup_invocations >= table.wide_matvec_workgroup) {
    fill(t.workgroup, table.wide_matvec_workgroup);
    fill(t.gate_up_workgroup, table.wide_gate_up_workgroup);
    fill(t.attn_output_rows_per_subgroup, table.wide_attn_output_rows_per_subgroup);
  }
  fill(t.rows_per_subgroup, table.matvec_rows_per_subgroup);
  fill(t.gate_up_workgroup, table.gate_up_workgroup);
  fill(t.attn_output_rows_per_subgroup, table.attn_output_rows_per_subgroup);
  fill(t.attention_defer_chunks, table.attention_defer_chunks);
  fill(t.attention_positions_per_pass, table.attention_positions_per_pass);
  fill(t.attention_head_split, table.attention_head_split);
  return t;
}

ops::MatvecOptions normalized(bool add_residual, const DecodeTuning& t,
                              ops::MatvecInput input = ops::MatvecInput::NormalizeInWorkgroup) {
  ops::MatvecOptions o;
  o.input = input;
  o.add_residual = add_residual;
  o.rows_per_subgroup = t.rows_per_subgroup;
  o.workgroup = t.workgroup;
  return o;
}

ops::MatvecOptions attn_output_kernel_options(const ops::OpTarget& t, const ops::AttentionDims& d, const models::BitNetConfig& c,
                                              uint32_t chunks, const ops::SplitKvTuning& a, ops::MatvecOptions o) {
  if (a.defer_combine)
    o.attention_partials = ops::AttentionPartialsInput{d, c.context_length, chunks, ops::attention_pass(t, d, a), a.defer_combine};
  return o;
}

// Decode attention as the tuning asks: attn_output does the combine of up to
// attention_defer_chunks chunks.
ops::SplitKvTuning decode_attention_tuning(const DecodeTuning& t, const ops::AttentionDims& d) {
  ops::SplitKvTuning a;
  a.positions_per_pass = t.attention_positions_per_pass;
  a.defer_combine = t.defer_attention_combine ? t.attention_defer_chunks : 0u;
  a.head_split = t.attention_head_split ? t.attention_head_split : d.group();
  return a;
}

// The device's target; its fragment order probed only where the tuning table asks for register
// operands, so no other start-up pays for the probe's pipeline.
ops::OpTarget target_for(rt::Context& ctx, bool exact_norm_scale) {
  const ops::OpTarget t = ops::with_exact_norm_scale(ops::OpTarget::from(ctx.info()), exact_norm_scale);
  return ops::asks_register_operands(ops::tuning_for(t)) ? ops::with_probed_fragments(ctx, t) : t;
}

}  // namespace

BitNetPipelines::BitNetPipelines(rt::Context& ctx, const models::BitNetConfig& c, uint32_t k,
                                 codegen::ShaderCache& cache, const DecodeTuning& requested, bool greedy_head,
                                 bool exact_norm_scale)
    : target(target_for(ctx, exact_norm_scale)),
      tuning(with_table(requested, ops::tuning_for(target), target, c)),
      dims{c.n_heads, c.n_kv_heads, c.head_dim},
      split(ops::lm_head_split(target, c.vocab_size, c.dim)),
      argmax_plan(ops::argmax_plan(target, c.vocab_size)),
      top_k_plan(k ? ops::top_k_plan(target, c.vocab_size, k) : ops::TopKPlan{}),
      top_k(k),
      attention_chunks(ops::attention_chunks(target, dims, c.context_length)),
      attention_tuning(decode_attention_tuning(tuning, dims)),
      residual_options(normalized(true, tuning, sub_norm_input(c))),
      gate_up_options(normalized(false, own_workgroup(tuning, tuning.gate_up_workgroup, tuning.gate_up_rows_per_subgroup))),
      qkv_options(normalized(false, {4, own_workgroup(tuning, tuning.qkv_workgroup).workgroup})),
      attn_output_options(normalized(true, own_workgroup(tuning, tuning.attn_output_workgroup, tuning.attn_output_rows_per_subgroup),
                                     sub_norm_input(c))) {
  ops::PipelineBatch batch;
  batch.add(ops::plan_embedding_lookup(target, {c.dim, split.rows_per_part, split.parts}), embedding);
  batch.add(ops::plan_ternary_matvec_qkv_rope(target, dims, c.dim, c.context_length, qkv_options), qkv);
  batch.add(ops::plan_rope_kv_write(target, dims, c.context_length), rope_kv);
  batch.add(ops::plan_attention_decode(target, dims, c.context_length, attention_chunks, attention_tuning), attention);
  batch.add(ops::plan_ternary_matvec(target, c.dim, dims.q_width(),
                                     attn_output_kernel_options(target, dims, c, attention_chunks, attention_tuning, attn_output_options)),
            attn_output);
  batch.add(ops::plan_ternary_matvec_gate_up(target, c.ffn_dim, c.dim, gate_activation(c), gate_up_options), gate_up);
  batch.add(ops::plan_ternary_matvec(target, c.dim, c.ffn_dim, residual_options), ffn_down);
  batch.add(ops::plan_rms_norm(target, c.dim), output_norm);
  batch.add(ops::plan_lm_head(target, c.vocab_size, c.dim), lm_head);
  batch.add(ops::plan_argmax_partial(target, c.vocab_size), argmax_partial);
  batch.add(ops::plan_argmax_final(target, c.vocab_size), argmax_final);
  batch.add(ops::plan_argmax_final(target, c.vocab_size, c.context_length), argmax_final_advance);
  if (k) {
    batch.add(ops::plan_top_k_partial(target, c.vocab_size, k), top_k_partial);
    batch.add(ops::plan_top_k_merge(target, c.vocab_size, k), top_k_merge);
    batch.add(ops::plan_sample_candidates(target, k, false, c.context_length), sample_advance);
  }
  if (greedy_head && ops::lm_head_pruned_supported(c.dim)) {
    batch.add(ops::plan_lm_head_input(target, c.dim), lm_head_input);
    batch.add(ops::plan_lm_head_bounds(target, c.vocab_size, c.dim, split.rows_per_part), lm_head_bounds);
    if (derives_shadow(ctx.info()))
      batch.add(ops::plan_lm_head_shadow(target, c.vocab_size, c.dim, split.rows_per_part), lm_head_shadow);
    batch.add(ops::plan_lm_head_candidates(target, c.vocab_size, c.dim, split.rows_per_part, c.context_length,
                                           ops::EmbeddingShape{c.dim, split.rows_per_part, split.parts}),
              lm_head_candidates);
    if (k) {
      batch.add(ops::plan_lm_head_candidate_list(target, c.vocab_size, c.dim, split.rows_per_part, k), lm_head_candidate_list);
      batch.add(ops::plan_sample_candidate_list(target, k, c.context_length, ops::EmbeddingShape{c.dim, split.rows_per_part, split.parts}),
                sample_list);
    }
  }
  batch.build(ctx, cache);  // every pipeline at once, on a pool of threads
}

void BitNetPipelines::build_repeat_penalty(rt::Context& ctx, const models::BitNetConfig& c, codegen::ShaderCache& cache) {
  static_assert(ops::kMaxRepeatLastN == models::kMaxRepeatLastN);
  if (!repeat_penalty) repeat_penalty.emplace(ops::make_pipeline(ctx, ops::plan_repeat_penalty(target, c.vocab_size, c.context_length), cache));
}

void BitNetPipelines::build_vocabulary(rt::Context& ctx, const models::BitNetConfig& c, codegen::ShaderCache& cache) {
  if (!top_k || vocab_draw_final) return;
  ops::PipelineBatch batch;
  vocab_mass_histogram.resize(ops::kVocabPasses);
  vocab_mass_select.resize(ops::kVocabPasses);
  for (uint32_t pass = 0; pass < ops::kVocabPasses; ++pass) {
    batch.add(ops::plan_vocab_mass_histogram(target, c.vocab_size, pass), vocab_mass_histogram[pass]);
    batch.add(ops::plan_vocab_mass_select(target, pass), vocab_mass_select[pass]);
  }
  batch.add(ops::plan_vocab_draw_partial(target, c.vocab_size, true), vocab_draw_partial);
  batch.add(ops::plan_vocab_draw_final(target, c.vocab_size, c.context_length, ops::EmbeddingShape{c.dim, split.rows_per_part, split.parts}),
            vocab_draw_final);
  batch.build(ctx, cache);
}

}  // namespace bdsl::bitnet
