#include "ops/catalog.h"

#include <algorithm>

#include "ops/attention/attention_decode.h"
#include "ops/attention/attention_output_quantize.h"
#include "ops/attention/attention_prefill.h"
#include "ops/attention/attention_prefill_coopmat.h"
#include "ops/attention/attention_split_kv.h"
#include "ops/attention/rope_kv_write.h"
#include "ops/common/embedding_lookup.h"
#include "ops/common/matrix_fragments.h"
#include "ops/common/parity_copy.h"
#include "ops/common/quantize_activations.h"
#include "ops/common/rms_norm.h"
#include "ops/examples/saxpy.h"
#include "ops/examples/stream_read.h"
#include "ops/examples/subgroup_softmax.h"
#include "ops/examples/workgroup_sum.h"
#include "ops/experimental/decode_layer.h"
#include "ops/head/argmax.h"
#include "ops/head/lm_head.h"
#include "ops/head/lm_head_batch.h"
#include "ops/head/lm_head_bounds_coopmat.h"
#include "ops/head/lm_head_pruned.h"
#include "ops/head/lm_head_shadow.h"
#include "ops/head/sample_candidates.h"
#include "ops/head/sample_vocabulary.h"
#include "ops/head/token_logprobs.h"
#include "ops/head/top_k.h"
#include "ops/ternary/ternary_matmul.h"
#include "ops/ternary/ternary_matmul_coopmat.h"
#include "ops/ternary/ternary_matvec.h"

namespace bdsl::ops {
namespace {

// BitNet b1.58 2B-4T, the shape the BitNet ops are shown at.
constexpr uint32_t kDim = 2560, kFfn = 6912, kVocab = 128256, kContext = 4096;
constexpr AttentionDims kHeads{20, 5, 128};

MatvecOptions normalized(bool residual, DotProduct dot = DotProduct::Auto) {
  MatvecOptions o;
  o.input = MatvecInput::NormalizeInWorkgroup;
  o.add_residual = residual;
  o.dot = dot;
  return o;
}

// The target as an NVIDIA GPU's where it lists no int8 tensor-core shape: a tensor-core op prints
// anywhere and runs where the device lists the shape.
OpTarget with_int8_tensor_cores(const OpTarget& t) {
  if (ternary_matmul_coopmat_shape(t)) return t;
  OpTarget n = t;
  n.matrix_shapes = {MatrixShape{16, 8, 32}};
  n.subgroup_size = 32;
  n.max_shared_bytes = std::max(t.max_shared_bytes, 49152u);
  n.max_workgroup_invocations = std::max(t.max_workgroup_invocations, 1024u);
  return n;
}

// ... and one whose matrices hold PTX's fragments (what the probe finds on an NVIDIA GPU), with a
// tile for the kernels that rely on them.
OpTarget with_ptx_fragments(const OpTarget& t) {
  OpTarget n = with_int8_tensor_cores(t);
  n.int8_fragments = Int8FragmentOrder::ptx();
  return n;
}
CoopMatmulOptions fragment_tile() {
  CoopMatmulOptions o;
  static_cast<CoopTile&>(o) = CoopTile{4, 2, 2, 4, false, 1, true};
  return o;
}

// The same for the F16 16x16x16 shape (attention on tensor cores).
OpTarget with_f16_tensor_cores(const OpTarget& t) {
  OpTarget n = with_int8_tensor_cores(t);
  n.subgroup_size = 32;
  n.matrix_shapes.push_back({16, 16, 16, ScalarKind::F16, ScalarKind::F32});
  return n;
}

EmbeddingShape embedding_shape(const OpTarget& t) {
  const LmHeadSplit s = lm_head_split(t, kVocab, kDim);
  return {kDim, s.rows_per_part, s.parts};
}

}  // namespace

const std::vector<CatalogEntry>& catalog() {
  using T = const OpTarget&;
  static const std::vector<CatalogEntry> entries = {
      {"embedding_lookup", "token row of the F16 table -> f32 (decode)", [](T t) { return plan_embedding_lookup(t, embedding_shape(t)).kernel; }},
      {"embedding_lookup_batch", "token rows -> f32 (prefill)", [](T t) { return plan_embedding_lookup_batch(t, embedding_shape(t)).kernel; }},
      {"embedding_lookup_fed", "token rows -> f32, each token given or left on the device by the step before (batched decode)",
       [](T t) { return plan_embedding_lookup_fed(t, embedding_shape(t), kVocab, 4).kernel; }},
      {"parity_copy", "a replayed step's outputs to the staging half its count picks, the count moved on (batched decode)",
       [](T t) { return plan_parity_copy(t, 1024, ParityCopy::ToHalf, true).kernel; }},
      {"rms_norm", "RMSNorm of rows, fp32", [](T t) { return plan_rms_norm(t, kDim).kernel; }},
      {"quantize_activations", "per-token int8 absmax quantization", [](T t) { return plan_quantize_activations(t, kDim).kernel; }},
      {"rms_norm_quantize", "RMSNorm then int8 quantization (prefill)", [](T t) { return plan_quantize_activations(t, kDim, {true}).kernel; }},
      {"rms_norm_quantize_relu2_gate_up", "relu(gate)^2 * up, RMSNorm, int8 (prefill's ffn_sub_norm)",
       [](T t) {
         QuantizeOptions o;
         o.rms_norm = true;
         o.gate_up_input = GateActivation::Relu2;
         return plan_quantize_activations(t, kFfn, o).kernel;
       }},
      {"quantize_silu_gate_up", "silu(gate) * up, int8 (prefill's input to ffn_down without a sub-norm)",
       [](T t) {
         QuantizeOptions o;
         o.gate_up_input = GateActivation::Silu;
         return plan_quantize_activations(t, kFfn, o).kernel;
       }},
      {"ternary_matvec", "y = W x, I2_S weights, int8 activations", [](T t) { return plan_ternary_matvec(t, kDim, kDim).kernel; }},
      {"ternary_matvec_plain", "the same without the packed int8 dot product",
       [](T t) {
         MatvecOptions o;
         o.dot = DotProduct::PlainInteger;
         return plan_ternary_matvec(t, kDim, kDim, o).kernel;
       }},
      {"qkv", "attn_norm + Q, K, V in one dispatch",
       [](T t) { return plan_ternary_matvec_qkv(t, kHeads.q_width(), kHeads.kv_width(), kHeads.kv_width(), kDim, normalized(false)).kernel; }},
      {"qkv_rope", "attn_norm + Q, K, V + RoPE + F16 KV-cache write in one dispatch (decode)",
       [](T t) { return plan_ternary_matvec_qkv_rope(t, kHeads, kDim, kContext, normalized(false)).kernel; }},
      {"attn_output", "attn_sub_norm + attn_output + residual (decode)",
       [](T t) { return plan_ternary_matvec(t, kDim, kHeads.q_width(), normalized(true)).kernel; }},
      {"attn_output_deferred", "the same merging attention's deferred chunks in its norm prologue (the model's)",
       [](T t) {
         SplitKvTuning tuning;
         tuning.head_split = kHeads.group();
         tuning.defer_combine = 4;
         MatvecOptions o = normalized(true);
         o.rows_per_subgroup = 4;
         o.attention_partials =
             AttentionPartialsInput{kHeads, kContext, attention_chunks(t, kHeads, kContext), attention_pass(t, kHeads, tuning), 4};
         return plan_ternary_matvec(t, kDim, kHeads.q_width(), o).kernel;
       }},
      {"gate_up", "ffn_norm + gate, up, relu(gate)^2 * up (decode)",
       [](T t) { return plan_ternary_matvec_gate_up(t, kFfn, kDim, GateActivation::Relu2, normalized(false)).kernel; }},
      {"gate_up_silu", "ffn_norm + gate, up, silu(gate) * up (decode; `llama`, 1bitLLM's `bitnet`)",
       [](T t) { return plan_ternary_matvec_gate_up(t, kFfn, kDim, GateActivation::Silu, normalized(false)).kernel; }},
      {"ffn_down_unnormed", "int8 of x + ffn_down + residual, no sub-norm (decode; `llama`)",
       [](T t) {
         MatvecOptions o = normalized(true);
         o.input = MatvecInput::QuantizeInWorkgroup;
         return plan_ternary_matvec(t, kDim, kFfn, o).kernel;
       }},
      {"ffn_down", "ffn_sub_norm + ffn_down + residual (decode)", [](T t) { return plan_ternary_matvec(t, kDim, kFfn, normalized(true)).kernel; }},
      {"decode_layer", "attn_output, gate/up, ffn_down and the next QKV + RoPE as phases of one dispatch (decode)",
       [](T t) {
         return plan_decode_layer(t, {kHeads, kDim, kFfn, kContext, true}, {normalized(true), normalized(false), normalized(false)}).kernel;
       }},
      {"ternary_matmul", "Y = W X for a block of tokens (prefill)", [](T t) { return plan_ternary_matmul(t, kDim, kDim).kernel; }},
      {"qkv_matmul", "Q, K, V for a block of tokens (prefill)",
       [](T t) { return plan_ternary_matmul_qkv(t, kHeads.q_width(), kHeads.kv_width(), kHeads.kv_width(), kDim).kernel; }},
      {"gate_up_matmul", "gate, up, relu^2 product for a block (prefill)", [](T t) { return plan_ternary_matmul_gate_up(t, kFfn, kDim, GateActivation::Relu2).kernel; }},
      {"ternary_matmul_coopmat", "Y = W X on tensor cores, s8 x s8 -> s32 (shown for 16x8x32)",
       [](T t) { return plan_ternary_matmul_coopmat(with_int8_tensor_cores(t), kDim, kDim).kernel; }},
      {"ternary_matmul_coopmat_split", "the same for a decode step of 16 tokens, the reduction split 3 ways (batched decode)",
       [](T t) {
         CoopMatmulOptions o = coop_tiles_for_step(with_int8_tensor_cores(t), 16);
         o.k_splits = 3;
         return plan_ternary_matmul_coopmat(with_int8_tensor_cores(t), kDim, kDim, o).kernel;
       }},
      {"gate_up_matmul_coopmat", "gate and up of a block on tensor cores in one dispatch, relu^2 product in the epilogue (prefill)",
       [](T t) {
         CoopMatmulOptions o = coop_tiles_for(with_int8_tensor_cores(t), kFfn, kDim);
         o.gate_up = GateActivation::Relu2;
         return plan_ternary_matmul_coopmat(with_int8_tensor_cores(t), kFfn, kDim, o).kernel;
       }},
      {"ternary_matmul_fragments", "Y = W X on tensor cores, operands read into PTX's fragments, no shared memory (prefill)",
       [](T t) { return plan_ternary_matmul_coopmat(with_ptx_fragments(t), kDim, kDim, fragment_tile()).kernel; }},
      {"gate_up_matmul_fragments", "gate and up of a block into PTX's fragments, relu^2 product in the epilogue (prefill)",
       [](T t) {
         CoopMatmulOptions o = fragment_tile();
         o.gate_up = GateActivation::Relu2;
         return plan_ternary_matmul_coopmat(with_ptx_fragments(t), kFfn, kDim, o).kernel;
       }},
      {"int8_fragments_probe", "where a device's 16x8x32 int8 matrices hold their elements (each invocation's)",
       [](T t) { return int8_fragments_probe(with_int8_tensor_cores(t)); }},
      {"attention_prefill_coopmat", "causal attention of a block on F16 tensor cores (prefill, 16x16x16)",
       [](T t) { return plan_attention_prefill_coopmat(with_f16_tensor_cores(t), kHeads, kContext).kernel; }},
      {"rope_kv_write", "NeoX RoPE on q and k, k/v into the F16 cache", [](T t) { return plan_rope_kv_write(t, kHeads, kContext).kernel; }},
      {"attention_decode", "one token over the F16 KV cache, split-K",
       [](T t) { return plan_attention_decode(t, kHeads, kContext, attention_chunks(t, kHeads, kContext)).kernel; }},
      {"attention_decode_per_head", "the same with a workgroup per query head, combine deferred (the model's)",
       [](T t) {
         SplitKvTuning tuning;
         tuning.head_split = kHeads.group();
         tuning.defer_combine = 4;
         return plan_attention_decode(t, kHeads, kContext, attention_chunks(t, kHeads, kContext), tuning).kernel;
       }},
      {"rope_kv_write_sequences", "the same for many sequences, each at its own position and cache rows (batched decode)",
       [](T t) { return plan_rope_kv_write_sequences(t, kHeads, kContext).kernel; }},
      {"attention_decode_sequences", "decode attention of many sequences, each over its own cache rows (batched decode)",
       [](T t) { return plan_attention_decode_sequences(t, kHeads, kContext, attention_chunks(t, kHeads, kContext)).kernel; }},
      {"attention_output_quantize", "attn_sub_norm + int8 of many sequences' attention, merging deferred chunks (batched decode)",
       [](T t) {
         SplitKvTuning tuning;
         tuning.defer_combine = 4;
         const uint32_t chunks = attention_chunks(t, kHeads, kContext);
         return plan_attention_output_quantize(t, AttentionPartialsInput{kHeads, kContext, chunks, attention_pass(t, kHeads, tuning), 4},
                                               true).kernel;
       }},
      {"attention_prefill", "causal attention of a block over the cache",
       [](T t) { return plan_attention_prefill(t, kHeads, kContext, attention_prefill_layout(t, kHeads)).kernel; }},
      {"lm_head", "logits from the tied F16 embedding", [](T t) { return plan_lm_head(t, kVocab, kDim).kernel; }},
      {"lm_head_batch", "the same for a batch of tokens, the table read once (batched decode)",
       [](T t) { return plan_lm_head_batch(t, kVocab, kDim, lm_head_split(t, kVocab, kDim).rows_per_part).kernel; }},
      {"lm_head_input", "greedy head: the final norm with x quantized once for the bounds",
       [](T t) { return plan_lm_head_input(t, kDim).kernel; }},
      {"lm_head_bounds", "greedy head: int8 shadow logits and their bounds",
       [](T t) { return plan_lm_head_bounds(t, kVocab, kDim, lm_head_split(t, kVocab, kDim).rows_per_part).kernel; }},
      {"lm_head_candidates", "greedy head: exact logits of the rows that may win, argmax partials",
       [](T t) { return plan_lm_head_candidates(t, kVocab, kDim, lm_head_split(t, kVocab, kDim).rows_per_part).kernel; }},
      {"lm_head_candidates_final", "the same, its last workgroup picking the token and advancing the step (the model's)",
       [](T t) { return plan_lm_head_candidates(t, kVocab, kDim, lm_head_split(t, kVocab, kDim).rows_per_part, kContext).kernel; }},
      {"lm_head_input_rows", "batched greedy head: the final norm and int8 x of every sequence",
       [](T t) { return plan_lm_head_input(t, kDim, true).kernel; }},
      {"lm_head_bounds_rows", "batched greedy head: each sequence's shadow bounds, the shadow read per sequence",
       [](T t) { return plan_lm_head_bounds(t, kVocab, kDim, lm_head_split(t, kVocab, kDim).rows_per_part, true).kernel; }},
      {"lm_head_bounds_coopmat", "batched greedy head: every sequence's bounds in one pass over the shadow, s8 x s8 -> s32 (16x8x32)",
       [](T t) { return plan_lm_head_bounds_coopmat(with_int8_tensor_cores(t), kVocab, kDim, 64).kernel; }},
      {"lm_head_candidate_rows", "batched greedy head: each sequence's exact logits of the rows that may win",
       [](T t) {
         return plan_lm_head_candidate_rows(t, kVocab, kDim, lm_head_split(t, kVocab, kDim).rows_per_part,
                                            lm_head_bounds_workgroups(t, kVocab)).kernel;
       }},
      {"lm_head_shadow", "greedy head: the int8 shadow of the F16 table, its scales and bounds (at load)",
       [](T t) { return plan_lm_head_shadow(t, kVocab, kDim, lm_head_split(t, kVocab, kDim).rows_per_part).kernel; }},
      {"lm_head_candidate_list", "sampled head: exact logits of the rows that may be among the 40 best, listed",
       [](T t) { return plan_lm_head_candidate_list(t, kVocab, kDim, lm_head_split(t, kVocab, kDim).rows_per_part, 40).kernel; }},
      {"lm_head_candidate_list_rows", "batched sampled head: each sequence's list of the rows that may be among its k best",
       [](T t) {
         return plan_lm_head_candidate_list_rows(t, kVocab, kDim, lm_head_split(t, kVocab, kDim).rows_per_part, kMaxTopK,
                                                 lm_head_bounds_workgroups(t, kVocab)).kernel;
       }},
      {"argmax_partial", "argmax, first pass", [](T t) { return plan_argmax_partial(t, kVocab).kernel; }},
      {"argmax_final", "argmax, second pass", [](T t) { return plan_argmax_final(t, kVocab).kernel; }},
      {"top_k_partial", "top-40 candidates, first pass", [](T t) { return plan_top_k_partial(t, kVocab, 40).kernel; }},
      {"top_k_merge", "top-40 candidates, second pass", [](T t) { return plan_top_k_merge(t, kVocab, 40).kernel; }},
      {"sample_candidates", "a token drawn from 128 candidates: top-k, top-p, min-p, temperature, Philox (a row per sequence)",
       [](T t) { return plan_sample_candidates(t, kMaxTopK, true).kernel; }},
      {"sample_candidate_list", "the same from an unsorted candidate list, advancing the step (the model's sampled head)",
       [](T t) { return plan_sample_candidate_list(t, 40, kContext).kernel; }},
      {"sample_candidate_list_rows", "the same for a batch, a list per sequence (batched decode)",
       [](T t) { return plan_sample_candidate_list_rows(t, kMaxTopK).kernel; }},
      {"vocab_mass_histogram", "top-p over the whole vocabulary: a radix pass summing token weights into buckets (a row per sequence)",
       [](T t) { return plan_vocab_mass_histogram(t, kVocab, 0).kernel; }},
      {"vocab_mass_select", "the same: the bucket where the mass from the top reaches top-p",
       [](T t) { return plan_vocab_mass_select(t, 0).kernel; }},
      {"vocab_draw_partial", "a draw over the whole vocabulary's kept tokens, first pass",
       [](T t) { return plan_vocab_draw_partial(t, kVocab).kernel; }},
      {"vocab_draw_final", "the same, second pass",
       [](T t) { return plan_vocab_draw_final(t, kVocab).kernel; }},
      {"token_logprobs", "log-probabilities of each sequence's token and its 20 best alternatives (a row per sequence)",
       [](T t) { return plan_token_logprobs(t, kVocab, 20, 20, 64, 20).kernel; }},
      {"stream_read", "bandwidth probe of the bench", [](T t) { return stream_read(t); }},
      {"saxpy", "y = a * x + y (tutorial)", [](T) { return saxpy(); }},
      {"workgroup_sum", "partial sums through shared memory (tutorial)",
       [](T t) { return workgroup_sum(std::min(256u, t.max_workgroup_invocations)); }},
      {"subgroup_softmax", "row softmax, one subgroup per row (tutorial)",
       [](T t) { return subgroup_softmax(std::max(64u, t.subgroup_size)); }},
  };
  return entries;
}

}  // namespace bdsl::ops
