// The pipelines of the batched paths: a block of tokens whose projections read every weight once
// for many tokens. BlockProjections is the projection set (prompt blocks, or the decode steps of
// a batch of sequences); PrefillPipelines adds what a prompt block needs besides (embedding,
// RMSNorm + int8 per token, causal attention over the block).
//
// QKV and gate/up run in one of two layouts. Fused: one subgroup-matmul dispatch for Q, K and V
// and one for gate and up (relu(gate)^2 * up in its epilogue). Separate: one dispatch per tensor,
// so each can run on tensor cores (ternary_matmul_auto); the dispatches of a step share no
// written buffer, so they run with no barrier between them, and ffn_sub_norm's quantize reads
// gate and up and forms relu(gate)^2 * up itself. Either way a token's projections are exact
// int32 accumulators through the same epilogue, so its results do not depend on the set.
#pragma once
#include <functional>
#include <optional>

#include "codegen/shader_cache.h"
#include "models/bitnet/device_weights.h"
#include "models/bitnet_config.h"
#include "ops/attention.h"
#include "ops/pipeline_batch.h"
#include "ops/plan.h"
#include "ops/target.h"
#include "runtime/context.h"
#include "runtime/graph.h"

namespace bdsl::bitnet {

// The most tokens a prompt block holds (longer prompts run in blocks): what a prompt
// projection's split scratch is sized for.
constexpr uint32_t kMaxPromptBlock = 512;

// Auto: Separate where the device has int8 tensor cores, else Fused (the subgroup matmul is
// faster fused: the activations are read once for all the tensors).
enum class PrefillProjections { Auto, Fused, Separate };

// Which projection kernels a block runs. step_tokens == 0: prompt blocks (up to 512 tokens,
// tensor cores where the device has them). step_tokens > 0: decode steps of up to that many
// tokens: the subgroup matmul with one token tile up to ops/tuning.h's step_subgroup_max_tokens,
// past it the tensor cores with tiles for the step (ops::coop_tiles_for_step).
struct ProjectionChoice {
  PrefillProjections layout = PrefillProjections::Auto;
  uint32_t step_tokens = 0;
  uint32_t subgroup_max_tokens = 0;  // 0: the tuning table's step_subgroup_max_tokens
  uint32_t coop_row_subgroups = 0, coop_token_subgroups = 0;  // the step's tensor-core tiles; 0: the table's
  int coop_double_buffer = -1;  // 0 or 1; -1: the table's
  // Steps of up to this many tokens with the Fused layout normalize in the projections
  // (BlockProjections::normalized); 0: the table's step_norm_fused_max_tokens; -1: never.
  int norm_fused_max_tokens = 0;
  // Decode steps in the Fused layout: QKV rotates q and k and writes each token's cache rows
  // itself (ternary_matmul_qkv_rope: BlockProjections::qkv_rope), bit for bit the QKV then
  // rope_kv_write_sequences it replaces; the step binds its sequences, the RoPE table and the
  // layer's caches (record_block_layer's rope_args).
  bool rope_in_qkv = false;
  // Decode steps whose attention leaves its chunks' combine to the consumer
  // (attention_decode_sequences with defer_combine): attn_output merges them in its prologue
  // where it normalizes in tiles of one token (BlockProjections::attn_output_merges), attn_sub_norm's
  // quantize where the input is quantized (BlockProjections::merge_quantize), bit for bit the
  // output attention would have combined. The step binds attention_step (its sequences) and
  // attention_partials (record_block_layer's attention_args). Projections that normalize in
  // tiles of several tokens cannot merge: they take attention's combined output.
  std::optional<ops::AttentionPartialsInput> attention_partials;
  // attn_output's rows per subgroup where it merges them (0: the engine's): the single-sequence
  // decode graph's shape, the same bits (each row's dot is exact whatever the grouping).
  uint32_t merging_attn_output_rows = 0;
  // Rows per subgroup of the projections in steps of several tokens that normalize in the
  // workgroups (BlockProjections::normalized), but for QKV with RoPE and a merging attn_output
  // (0: the table's step_rows_per_subgroup): fewer, longer workgroups where a step's tokens fill
  // the GPU several times over. The same bits.
  uint32_t step_rows_per_subgroup = 0;
  // Tokens a workgroup in those steps (0: the table's step_norm_tile_tokens), all normalized
  // together; a merging attn_output takes one. The same bits.
  uint32_t step_norm_tile = 0;
  // The step's tensor-core projections split their reduction so that each workgroup multiplies
  // about this many 128-column blocks (0: none; -1: the table's step_coop_blocks_per_split within
  // its limits; above 0: whatever the limits).
  int coop_blocks_per_split = -1;
};

// Whether the projections `choice` gives normalize each token in their workgroups
// (BlockProjections::normalized), without building them.
bool normalizes_in_projections(const ops::OpTarget& target, const ProjectionChoice& choice);

struct BlockProjections {
  // With `batch`, the pipelines are added to it (the caller builds them with others, on threads);
  // else built here, together.
  BlockProjections(rt::Context& ctx, const models::BitNetConfig& config, const ops::OpTarget& target,
                   const ProjectionChoice& choice = {}, codegen::ShaderCache& cache = codegen::default_shader_cache(),
                   ops::PipelineBatch* batch = nullptr);

  bool tensor_cores = false;  // the single-tensor projections run on tensor cores
  bool separate = false;      // the layout chosen (Separate)
  // The four projections normalize and quantize their input themselves (bind x and norm_weight,
  // push eps then tokens), bit for bit as norm_quantize would: no norm dispatches in the layer.
  bool normalized = false;
  bool sub_norms = true;  // the graph's: attn_sub_norm and ffn_sub_norm in front of attn_output and ffn_down
  // attn_output reads attention's deferred partials (ProjectionChoice::attention_partials).
  bool attn_output_merges = false;
  // Else, with ProjectionChoice::attention_partials and quantized input: attn_sub_norm's norm +
  // int8 merges them (ops::attention_output_quantize), instead of norm_quantize.
  std::optional<ops::PlannedPipeline> merge_quantize;
  // Whether the block's attention must leave its combine to the consumer (defer_combine).
  bool merges_attention() const { return attn_output_merges || merge_quantize.has_value(); }
  // Each with its grid for a block's tokens (ops/plan.h).
  // ffn_down's input: RMSNorm (ffn_sub_norm, with sub_norms) + int8 over ffn_dim (Separate: reads
  // gate and up and forms act(gate) * up); not with `normalized`.
  std::optional<ops::PlannedPipeline> norm_quantize_ffn;
  // int8 alone over dim: attention's output before attn_output without sub-norms; not with `normalized`.
  std::optional<ops::PlannedPipeline> quantize;
  std::optional<ops::PlannedPipeline> qkv, gate_up;  // Fused (gate_up: also Separate's fused prompt gate/up)
  std::optional<ops::PlannedPipeline> qkv_rope;       // Fused with ProjectionChoice::rope_in_qkv, instead of qkv
  // Separate: Q; K and V (one shape); gate and up (one shape). Either engine. Prompt blocks on
  // tensor cores take gate and up as one dispatch instead (ops/tuning.h's coop_gate_up_fused):
  // `gate_up`, with act(gate) * up in its epilogue, and no gate_up_proj.
  std::optional<ops::PlannedPipeline> q_proj, kv_proj, gate_up_proj;
  // Whether gate and up write two outputs that ffn_sub_norm's quantize multiplies (it binds `up`).
  bool gate_up_apart() const { return gate_up_proj.has_value(); }
  ops::PlannedPipeline attn_output;  // residual added
  ops::PlannedPipeline ffn_down;     // residual added
  // Tensor-core projections that split their reduction (a step's: ProjectionChoice::
  // coop_blocks_per_split; a prompt's: its tile's k_splits, ops/tuning.h) bind scratch of their
  // own: ternary_matmul_coopmat's totals and tickets, zero between dispatches. One set for each
  // projection of a layer (one kernel may split where another does not).
  struct SplitScratch {
    rt::Buffer totals, tickets;
    uint32_t tokens = 0;  // what they are sized for: the step's, or a prompt block's most
  };
  enum SplitSite { kSplitQ, kSplitK, kSplitV, kSplitAttnOutput, kSplitGate, kSplitUp, kSplitFfnDown, kSplitSites };
  std::vector<std::optional<SplitScratch>> split_scratch = std::vector<std::optional<SplitScratch>>(kSplitSites);
  // The scratch bindings for a site in a block of n tokens (none where its projection does not
  // split); std::logic_error where n is more than the scratch holds.
  std::vector<rt::Arg> split_args(SplitSite site, uint32_t n) const;
};

struct PrefillPipelines {
  // tensor_core_attention: build attention_coopmat where the device can run it.
  PrefillPipelines(rt::Context& ctx, const models::BitNetConfig& config, const ops::OpTarget& target,
                   uint32_t rows_per_part, uint32_t parts,
                   PrefillProjections layout = PrefillProjections::Auto, bool tensor_core_attention = true,
                   codegen::ShaderCache& cache = codegen::default_shader_cache());

  ops::PrefillAttentionLayout attention_layout;  // how `attention` tiles a block (its scratch sizes)
  ops::PlannedPipeline embedding;       // token ids -> rows of the F16 table
  ops::PlannedPipeline norm_quantize;   // RMSNorm + int8, over dim (attn_norm, ffn_norm, attn_sub_norm)
  ops::PlannedPipeline attention;       // causal, block of tokens against the cache
  // The same on F16 tensor cores, where the device has them and it was asked for (for long
  // blocks late in the context: ops::attention_prefill_coopmat_pays).
  std::optional<ops::PlannedPipeline> attention_coopmat;
  BlockProjections projections;
  // Blocks of up to kShortBlock tokens (a chat turn, a server's prompt): the projections with a
  // decode step's tiles, many more workgroups than the prompt tiles give so few tokens. Only
  // where the device has tensor cores: elsewhere both choices are the same subgroup kernels.
  static constexpr uint32_t kShortBlock = 64;
  std::optional<BlockProjections> short_projections;
  const BlockProjections& projections_for(uint32_t tokens) const {
    return tokens <= kShortBlock && short_projections ? *short_projections : projections;
  }
 private:
  // The public one's work: every pipeline into `batch`, built together at the end.
  PrefillPipelines(rt::Context& ctx, const models::BitNetConfig& config, const ops::OpTarget& target, uint32_t rows_per_part,
                   uint32_t parts, PrefillProjections layout, bool tensor_core_attention, codegen::ShaderCache& cache,
                   ops::PipelineBatch&& batch);
};

// The activations of a block of n tokens, token-major. `up` only with the Separate layout.
struct BlockActivations {
  const rt::Buffer &x, &q8, &act, &q, &k, &v, &attn, &ffn;
  const rt::Buffer* up = nullptr;
};

// Layer `w` of a block of n tokens into g: norm+quantize, QKV, attend() (RoPE, the cache rows
// and attention into b.attn, recorded by the caller), norm+quantize, attn_output (+ residual),
// norm+quantize, gate/up, norm+quantize, ffn_down (+ residual); with pp.normalized, the
// projections alone. With pp.qkv_rope, QKV does the RoPE and cache rows itself, with `rope_args`
// (sequences, rope_table, k_cache, v_cache), and attend() records the attention alone. With
// pp.merges_attention(), attn_output or attn_sub_norm's quantize also binds `attention_args`
// (attention_step, attention_partials).
void record_block_layer(rt::Graph& g, const BlockProjections& pp, const ops::PlannedPipeline& norm_quantize,
                        const LayerWeights& w, const BlockActivations& b, uint32_t n, float eps,
                        const std::function<void()>& attend, const std::vector<rt::Arg>& rope_args = {},
                        const std::vector<rt::Arg>& attention_args = {});

}  // namespace bdsl::bitnet
