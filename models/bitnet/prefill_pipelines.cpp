#include "models/bitnet/prefill_pipelines.h"

#include <algorithm>

#include "models/bitnet/graph_traits.h"
#include "ops/attention.h"
#include "ops/common.h"
#include "ops/ternary.h"
#include "ops/tuning.h"

namespace bdsl::bitnet {
namespace {

// The engine and token tile a choice gives its kernels.
struct Engine {
  ops::MatmulEngine engine = ops::MatmulEngine::Auto;
  ops::MatmulOptions options;
  bool cooperative = false;
  bool separate = false;
  bool normalized = false;
};

Engine engine_for(const ops::OpTarget& t, const ProjectionChoice& choice) {
  Engine e;
  const bool tensor_cores = ops::ternary_matmul_coopmat_shape(t).has_value();
  const uint32_t subgroup_max = choice.subgroup_max_tokens ? choice.subgroup_max_tokens : ops::tuning_for(t).step_subgroup_max_tokens;
  bool cooperative = tensor_cores;
  if (choice.step_tokens) {
    e.options.step_tokens = choice.step_tokens;
    e.options.step_row_subgroups = choice.coop_row_subgroups;
    e.options.step_token_subgroups = choice.coop_token_subgroups;
    e.options.step_double_buffer = choice.coop_double_buffer;
    e.options.step_blocks_per_split = choice.coop_blocks_per_split;
    if (choice.step_tokens <= subgroup_max) {
      cooperative = false;
      e.engine = ops::MatmulEngine::Subgroup;
      e.options.tokens_per_workgroup = std::min(e.options.tokens_per_workgroup, choice.step_tokens);
    }
  }
  e.cooperative = cooperative;
  e.separate = choice.layout == PrefillProjections::Auto ? cooperative : choice.layout == PrefillProjections::Separate;
  // In-workgroup norms where they give the standalone quantizer's bits: the same workgroup size.
  const int fused_max =
      choice.norm_fused_max_tokens ? choice.norm_fused_max_tokens : int(ops::tuning_for(t).step_norm_fused_max_tokens);
  const ops::QuantizeOptions standalone{true};
  e.normalized = choice.step_tokens && int(choice.step_tokens) <= fused_max && !cooperative && !e.separate &&
                 ops::ternary_matvec_workgroup(t, e.options.projection) == ops::quantize_activations_workgroup(t, standalone);
  if (e.normalized) {
    e.options.projection.input = ops::MatvecInput::NormalizeInWorkgroup;
    // step_norm_tile tokens a workgroup (the table's: one), each normalized as the one-lane
    // bucket does, all of a tile through each pass together; the weights are read once per tile,
    // mostly from the L2 (bench/RESULTS.md run 31).
    const ops::Tuning& table = ops::tuning_for(t);
    const uint32_t tile = choice.step_norm_tile ? choice.step_norm_tile : table.step_norm_tile_tokens;
    e.options.tokens_per_workgroup = std::max(1u, std::min(tile, choice.step_tokens));
    const uint32_t rows = choice.step_rows_per_subgroup ? choice.step_rows_per_subgroup : table.step_rows_per_subgroup;
    if (choice.step_tokens > 1 && rows) e.options.projection.rows_per_subgroup = rows;
  }
  return e;
}

// Whether attn_output merges attention's deferred partials: a choice that asks, normalized in the
// workgroups (MatvecOptions::attention_partials; attn_output then takes tiles of one token).
bool merges_in_attn_output(const ProjectionChoice& choice, const Engine& e) { return choice.attention_partials && e.normalized; }

// A single-tensor projection with the choice's engine. `residual`: attn_output and ffn_down, whose
// normalized input is their sub-norm's, or without sub-norms the int8 of their input alone.
ops::Plan projection(const ops::OpTarget& t, const models::BitNetConfig& c, const Engine& e, uint32_t rows, uint32_t cols,
                     bool residual, const std::optional<ops::AttentionPartialsInput>& attention = std::nullopt) {
  ops::MatmulOptions o = e.options;
  o.projection.add_residual = residual;
  if (residual && e.normalized) o.projection.input = sub_norm_input(c);
  o.projection.attention_partials = attention;
  return ops::plan_ternary_matmul_auto(t, rows, cols, o, e.engine);
}

// ffn_down's input: act(gate) * up (Separate: formed here from the two projections), normalized
// by ffn_sub_norm where the graph has sub-norms, then int8.
ops::QuantizeOptions ffn_down_quantize(const models::BitNetConfig& c, bool separate) {
  ops::QuantizeOptions o;
  o.rms_norm = c.sub_norms;
  if (separate) o.gate_up_input = gate_activation(c);
  return o;
}

}  // namespace

bool normalizes_in_projections(const ops::OpTarget& target, const ProjectionChoice& choice) {
  return engine_for(target, choice).normalized;
}

BlockProjections::BlockProjections(rt::Context& ctx, const models::BitNetConfig& c, const ops::OpTarget& t,
                                   const ProjectionChoice& choice, codegen::ShaderCache& cache, ops::PipelineBatch* batch)
    : tensor_cores(engine_for(t, choice).cooperative),
      separate(engine_for(t, choice).separate),
      normalized(engine_for(t, choice).normalized),
      sub_norms(c.sub_norms),
      attn_output_merges(merges_in_attn_output(choice, engine_for(t, choice))) {
  if (c.n_heads * c.head_dim != c.dim)
    throw std::invalid_argument("prefill: attention's output is quantized over dim, so n_heads * head_dim must equal dim");
  const Engine e = engine_for(t, choice);
  ops::PipelineBatch own;
  ops::PipelineBatch& b = batch ? *batch : own;
  Engine merging = e;
  if (attn_output_merges) merging.options.tokens_per_workgroup = 1;  // the merge reads one token's partials
  if (attn_output_merges && choice.merging_attn_output_rows)
    merging.options.projection.rows_per_subgroup = choice.merging_attn_output_rows;
  // Split projections get their scratch (zero) here, for a step's tokens or a prompt block's
  // most; every site's grid is known now.
  auto add_split = [&](ops::Plan plan, auto& into, uint32_t rows, std::initializer_list<SplitSite> sites) {
    const uint32_t tokens = choice.step_tokens ? choice.step_tokens : kMaxPromptBlock;
    const rt::Grid g = plan.grid(tokens);
    if (g.z > 1)
      for (SplitSite site : sites) {
        SplitScratch s{rt::Buffer(ctx, 4ull * tokens * rows, {false, "split totals"}),
                       rt::Buffer(ctx, 4ull * g.x * g.y, {false, "split tickets"}), tokens};
        s.totals.fill(0);
        s.tickets.fill(0);
        split_scratch[site] = std::move(s);
      }
    b.add(std::move(plan), into);
  };
  add_split(projection(t, c, merging, c.dim, c.n_heads * c.head_dim, true, attn_output_merges ? choice.attention_partials : std::nullopt),
            attn_output, c.dim, {kSplitAttnOutput});
  add_split(projection(t, c, e, c.dim, c.ffn_dim, true), ffn_down, c.dim, {kSplitFfnDown});
  // A prompt block's gate and up in one tensor-core dispatch, where its tile does not split.
  ops::CoopMatmulOptions gate_up_tile;
  if (separate && e.cooperative && !choice.step_tokens) {
    gate_up_tile = ops::coop_tiles_for(t, c.ffn_dim, c.dim);
    gate_up_tile.gate_up = gate_activation(c);
  }
  const bool fused_gate_up = gate_up_tile.gate_up && gate_up_tile.k_splits == 1 && ops::tuning_for(t).coop_gate_up_fused;
  if (!normalized)
    b.add(ops::plan_quantize_activations(t, c.ffn_dim, ffn_down_quantize(c, separate && !fused_gate_up)), norm_quantize_ffn);
  if (!normalized && !c.sub_norms) b.add(ops::plan_quantize_activations(t, c.dim), quantize);
  if (!normalized && choice.attention_partials)
    b.add(ops::plan_attention_output_quantize(t, *choice.attention_partials, c.sub_norms), merge_quantize);
  if (separate) {
    add_split(projection(t, c, e, c.n_heads * c.head_dim, c.dim, false), q_proj, c.n_heads * c.head_dim, {kSplitQ});
    add_split(projection(t, c, e, c.kv_dim(), c.dim, false), kv_proj, c.kv_dim(), {kSplitK, kSplitV});
    if (fused_gate_up)
      b.add(ops::plan_ternary_matmul_coopmat(t, c.ffn_dim, c.dim, gate_up_tile), gate_up);
    else
      add_split(projection(t, c, e, c.ffn_dim, c.dim, false), gate_up_proj, c.ffn_dim, {kSplitGate, kSplitUp});
  } else {
    if (choice.rope_in_qkv && choice.step_tokens)
      b.add(ops::plan_ternary_matmul_qkv_rope(t, {c.n_heads, c.n_kv_heads, c.head_dim}, c.dim, c.context_length, e.options), qkv_rope);
    else
      b.add(ops::plan_ternary_matmul_qkv(t, c.n_heads * c.head_dim, c.kv_dim(), c.kv_dim(), c.dim, e.options), qkv);
    b.add(ops::plan_ternary_matmul_gate_up(t, c.ffn_dim, c.dim, gate_activation(c), e.options), gate_up);
  }
  if (!batch) own.build(ctx, cache);
}

std::vector<rt::Arg> BlockProjections::split_args(SplitSite site, uint32_t n) const {
  const auto& s = split_scratch[site];
  if (!s) return {};
  if (n > s->tokens)
    throw std::logic_error("record_block_layer: a block of " + std::to_string(n) + " tokens on projections built for steps of " +
                           std::to_string(s->tokens));
  return {{"totals", s->totals}, {"tickets", s->tickets}};
}

PrefillPipelines::PrefillPipelines(rt::Context& ctx, const models::BitNetConfig& c, const ops::OpTarget& t,
                                   uint32_t rows_per_part, uint32_t parts, PrefillProjections layout,
                                   bool tensor_core_attention, codegen::ShaderCache& cache)
    : PrefillPipelines(ctx, c, t, rows_per_part, parts, layout, tensor_core_attention, cache, ops::PipelineBatch{}) {}

PrefillPipelines::PrefillPipelines(rt::Context& ctx, const models::BitNetConfig& c, const ops::OpTarget& t,
                                   uint32_t rows_per_part, uint32_t parts, PrefillProjections layout,
                                   bool tensor_core_attention, codegen::ShaderCache& cache, ops::PipelineBatch&& batch)
    : attention_layout(ops::attention_prefill_layout(t, {c.n_heads, c.n_kv_heads, c.head_dim})),
      projections(ctx, c, t, {layout}, cache, &batch) {
  batch.add(ops::plan_embedding_lookup_batch(t, {c.dim, rows_per_part, parts}), embedding);
  batch.add(ops::plan_quantize_activations(t, c.dim, {true}), norm_quantize);
  const ops::AttentionDims dims{c.n_heads, c.n_kv_heads, c.head_dim};
  batch.add(ops::plan_attention_prefill(t, dims, c.context_length, attention_layout), attention);
  if (tensor_core_attention && ops::attention_prefill_coopmat_supported(t, dims))
    batch.add(ops::plan_attention_prefill_coopmat(t, dims, c.context_length), attention_coopmat);
  if (ops::ternary_matmul_coopmat_shape(t)) short_projections.emplace(ctx, c, t, ProjectionChoice{layout, kShortBlock}, cache, &batch);
  batch.build(ctx, cache);  // every prompt pipeline at once, on a pool of threads
}

void record_block_layer(rt::Graph& g, const BlockProjections& pp, const ops::PlannedPipeline& norm_quantize,
                        const LayerWeights& w, const BlockActivations& b, uint32_t n, float eps,
                        const std::function<void()>& attend, const std::vector<rt::Arg>& rope_args,
                        const std::vector<rt::Arg>& attention_args) {
  if (pp.qkv_rope && rope_args.empty()) throw std::logic_error("record_block_layer: QKV with RoPE needs its bindings");
  if (pp.merges_attention() && attention_args.empty())
    throw std::logic_error("record_block_layer: merging attention's partials needs their bindings");
  // Q, K and V of the block's input (x normalized here, or the quantized block): into b.q, b.k,
  // b.v, or with RoPE q alone and the cache rows.
  auto qkv = [&](std::vector<rt::Arg> input, const rt::PushConstants& push) {
    std::vector<rt::Arg> args = {{"w_q", w.attn_q}, {"w_k", w.attn_k}, {"w_v", w.attn_v}, {"y_q", b.q}};
    args.insert(args.end(), input.begin(), input.end());
    if (pp.qkv_rope) {
      args.insert(args.end(), rope_args.begin(), rope_args.end());
      pp.qkv_rope->dispatch(g, args, push, n);
    } else {
      args.insert(args.end(), {{"y_k", b.k}, {"y_v", b.v}});
      pp.qkv->dispatch(g, args, push, n);
    }
  };
  // A single-tensor projection of the quantized block into `out` (or added to it, with a residual),
  // with its split's scratch where it splits its reduction.
  auto project = [&](const ops::PlannedPipeline& proj, const rt::Buffer& weights, const rt::Buffer& out,
                     BlockProjections::SplitSite site) {
    std::vector<rt::Arg> args = {{"w", weights}, {"x_q", b.q8}, {"x_act", b.act}, {"y", out}};
    const auto scratch = pp.split_args(site, n);
    args.insert(args.end(), scratch.begin(), scratch.end());
    proj.dispatch(g, args, rt::push(n), n);
  };
  // RMSNorm of the block's rows of `x`, quantized to int8 for the next projection.
  auto norm_quantize_rows = [&](const rt::Buffer& x, const rt::Buffer& norm_weight) {
    norm_quantize.dispatch(g, {{"x", x}, {"norm_weight", norm_weight}, {"q", b.q8}, {"act", b.act}}, rt::push(eps), n);
  };
  if (pp.normalized) {  // each projection normalizes its own input: four dispatches a layer
    qkv({{"x", b.x}, {"norm_weight", w.attn_norm}}, rt::push(eps, n));
    attend();
    // Without sub-norms attn_output and ffn_down quantize their input alone: no norm weight, no eps.
    auto sub_normed = [&](const ops::PlannedPipeline& proj, const rt::Buffer& weights, const rt::Buffer& x,
                          const rt::Buffer& norm_weight, const std::vector<rt::Arg>& extra) {
      std::vector<rt::Arg> args = {{"w", weights}, {"x", x}};
      if (pp.sub_norms) args.push_back({"norm_weight", norm_weight});
      args.push_back({"y", b.x});
      args.insert(args.end(), extra.begin(), extra.end());
      proj.dispatch(g, args, pp.sub_norms ? rt::push(eps, n) : rt::push(n), n);
    };
    sub_normed(pp.attn_output, w.attn_output, b.attn, w.attn_sub_norm, pp.attn_output_merges ? attention_args : std::vector<rt::Arg>{});
    pp.gate_up->dispatch(g, {{"w_gate", w.ffn_gate}, {"w_up", w.ffn_up}, {"x", b.x}, {"norm_weight", w.ffn_norm}, {"y", b.ffn}},
                         rt::push(eps, n), n);
    sub_normed(pp.ffn_down, w.ffn_down, b.ffn, w.ffn_sub_norm, {});
    return;
  }
  norm_quantize_rows(b.x, w.attn_norm);
  if (pp.separate) {  // three dispatches in one step: they write different buffers
    project(*pp.q_proj, w.attn_q, b.q, BlockProjections::kSplitQ);
    project(*pp.kv_proj, w.attn_k, b.k, BlockProjections::kSplitK);
    project(*pp.kv_proj, w.attn_v, b.v, BlockProjections::kSplitV);
  } else {
    qkv({{"x_q", b.q8}, {"x_act", b.act}}, rt::push(n));
  }
  attend();
  if (pp.merge_quantize) {
    std::vector<rt::Arg> args = {{"x", b.attn}, {"q", b.q8}, {"act", b.act}};
    if (pp.sub_norms) args.push_back({"norm_weight", w.attn_sub_norm});
    args.insert(args.end(), attention_args.begin(), attention_args.end());
    pp.merge_quantize->dispatch(g, args, pp.sub_norms ? rt::push(eps) : rt::PushConstants{}, n);
  } else if (pp.sub_norms) {
    norm_quantize_rows(b.attn, w.attn_sub_norm);
  } else {
    pp.quantize->dispatch(g, {{"x", b.attn}, {"q", b.q8}, {"act", b.act}}, {}, n);
  }
  project(pp.attn_output, w.attn_output, b.x, BlockProjections::kSplitAttnOutput);
  norm_quantize_rows(b.x, w.ffn_norm);
  // ffn_down's input, quantized by norm_quantize_ffn (ffn_sub_norm in front where the graph has it).
  std::vector<rt::Arg> ffn_input;
  if (pp.gate_up_apart()) {  // act(gate) * up is formed by the quantize below
    project(*pp.gate_up_proj, w.ffn_gate, b.ffn, BlockProjections::kSplitGate);
    project(*pp.gate_up_proj, w.ffn_up, *b.up, BlockProjections::kSplitUp);
    ffn_input = {{"gate", b.ffn}, {"up", *b.up}};
  } else {
    pp.gate_up->dispatch(g, {{"w_gate", w.ffn_gate}, {"w_up", w.ffn_up}, {"x_q", b.q8}, {"x_act", b.act}, {"y", b.ffn}},
                         rt::push(n), n);
    ffn_input = {{"x", b.ffn}};
  }
  ffn_input.insert(ffn_input.end(), {{"q", b.q8}, {"act", b.act}});
  if (pp.sub_norms) ffn_input.push_back({"norm_weight", w.ffn_sub_norm});
  pp.norm_quantize_ffn->dispatch(g, ffn_input, pp.sub_norms ? rt::push(eps) : rt::PushConstants{}, n);
  project(pp.ffn_down, w.ffn_down, b.x, BlockProjections::kSplitFfnDown);
}

}  // namespace bdsl::bitnet
