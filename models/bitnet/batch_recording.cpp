// BitNetBatchDecoder's recordings (batch_decoder.h): a bucket's step (embedding and layers) and
// the tails by row count and kind, each recorded once and replayed.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "models/bitnet/activations.h"
#include "models/bitnet/batch_decoder.h"
#include "models/bitnet/batch_lanes.h"
#include "ops/attention.h"
#include "ops/common.h"
#include "ops/head.h"
#include "ops/tuning.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bitnet {

void BitNetBatchDecoder::record_all_buckets() {
  for (uint32_t lanes = 1;; lanes = lanes < exact_buckets_ ? lanes + 1 : std::min(lanes * 2, capacity_)) {
    step_for(lanes);
    if (lanes == capacity_) break;
  }
  for (uint32_t rows = 1;; rows = std::min(rows * 2, slots_)) {
    // Every kind a step's outputs may ask for: any mix of greedy outputs, outputs drawn from
    // their top-k and outputs drawn over every logit (the last two with the model's top-k only).
    for (bool greedy : {true, false})
      for (bool sampled : {true, false})
        for (bool vocabulary : {false, true})
          for (int logprobs : {0, 1, 2})  // none, without alternatives, with them
            if ((greedy || sampled || vocabulary) && (top_k() || !(sampled || vocabulary)))
              tail_for(rows, tail_kind(greedy, sampled, vocabulary, logprobs > 0, logprobs > 1));
    if (rows == slots_) break;
  }
  // The one-lane bucket runs each one-row tail in its own command buffer.
  for (auto& t : tails_)
    if (t.rows == 1 && !t.with_layers) t.with_layers = record_one_lane(step_for(1), t);
}

BitNetBatchDecoder::TailKind BitNetBatchDecoder::tail_kind(bool greedy, bool sampled, bool vocabulary, bool logprobs,
                                                           bool logprob_top) const {
  TailKind kind;
  // Outputs drawn from their top-k take the candidate lists wherever there are any, so that their
  // logits do not depend on what else the step carries; greedy ones beside them take the lists too.
  kind.listed = listed_head_ && sampled;
  // A tail with every logit (for log-probabilities) takes greedy outputs' argmax from them: the
  // same bits (lm_head_batch is lm_head's arithmetic, ties to the lower id) without the bounds pass.
  kind.pruned = pruned_head_ && greedy && !kind.listed && !logprobs;
  // Every logit: for greedy outputs without the pruned head, draws over the vocabulary, draws from
  // the top-k without the lists, the candidates decode() returns, and log-probabilities.
  kind.full = (greedy && !pruned_head_) || vocabulary || (sampled && !kind.listed) || (options_.return_candidates && top_k()) ||
              logprobs;
  kind.top_k = top_k() && ((sampled && !kind.listed) || options_.return_candidates);
  kind.vocabulary = vocabulary;
  kind.logprobs = logprobs;
  kind.logprob_top = logprobs && logprob_top;
  return kind;
}

ProjectionChoice BitNetBatchDecoder::projection_choice(uint32_t lanes) const {
  // attn_output where it merges attention's chunks: the decode graph's rows per subgroup.
  const DecodeTuning& decode = model_.pipelines().tuning;
  const uint32_t merging_rows = options_.merging_attn_output_rows      ? options_.merging_attn_output_rows
                                : decode.attn_output_rows_per_subgroup ? decode.attn_output_rows_per_subgroup
                                                                       : decode.rows_per_subgroup;
  return {layout_, lanes, options_.subgroup_max_tokens, options_.coop_row_subgroups, options_.coop_token_subgroups,
          options_.coop_double_buffer, options_.norm_fused_max_tokens, options_.rope_in_qkv, deferred_partials_,
          merging_rows, options_.step_rows_per_subgroup, options_.step_norm_tile, options_.coop_blocks_per_split};
}

BitNetBatchDecoder::Step& BitNetBatchDecoder::step_for(uint32_t lanes) {
  for (auto& s : steps_)
    if (s.lanes == lanes) return s;
  Step s{lanes, std::make_unique<BlockProjections>(ctx_, model_.config(), model_.pipelines().target, projection_choice(lanes)),
         nullptr};
  s.graph = record_step(lanes, *s.projections);
  steps_.push_back(std::move(s));
  return steps_.back();
}

BitNetBatchDecoder::Tail& BitNetBatchDecoder::tail_for(uint32_t rows, TailKind kind) {
  for (auto& t : tails_)
    if (t.rows == rows && t.kind == kind) return t;
  Tail t{rows, kind, nullptr, nullptr, nullptr};
  const auto& p = model_.pipelines();
  const uint32_t vocab = model_.vocab_size(), dim = model_.config().dim;
  // A draw over every logit takes lm_head_batch's f32 logits, lm_head's bits: decode_sampled's
  // draw, where the tensor cores' (x in F16) would move it in the last bits and so the text. So do
  // log-probabilities: those of the logits the tokens were chosen from.
  if (kind.full && head_on_tensor_cores_ && !kind.vocabulary && !kind.logprobs) {
    auto it = coopmat_heads_.find(rows);
    if (it == coopmat_heads_.end())
      it = coopmat_heads_.emplace(rows, ops::make_pipeline(ctx_, ops::plan_lm_head_coopmat(p.target, vocab, dim, rows))).first;
    t.head = &it->second;
  }
  if ((kind.pruned || kind.listed) && bounds_on_tensor_cores_ && rows >= ops::tuning_for(p.target).batch_head_coopmat_min_rows) {
    auto it = coopmat_bounds_.find(rows);
    if (it == coopmat_bounds_.end())
      it = coopmat_bounds_.emplace(rows, ops::make_pipeline(ctx_, ops::plan_lm_head_bounds_coopmat(p.target, vocab, dim, rows))).first;
    t.bounds = &it->second;
  }
  t.graph = record_tail(rows, t);
  tails_.push_back(std::move(t));
  return tails_.back();
}

const ops::PlannedPipeline& BitNetBatchDecoder::attention_for(uint32_t lanes, const BlockProjections& proj) {
  ops::SplitKvTuning tuning = attention_tuning_;
  if (proj.attn_output_merges)
    tuning.head_split = merging_split_;
  else if (lanes > spread_lanes_)
    tuning.chunks_per_workgroup = per_workgroup_;
  else
    tuning.head_split = spread_split_;
  if (proj.merges_attention()) tuning.defer_combine = attention_chunks_;
  // The one-lane bucket's kernel serves one sequence (token 0 a constant: faster code).
  const bool one = lanes == 1;
  const std::array<uint32_t, 4> key = {tuning.head_split, ops::attention_chunks_per_workgroup(attention_chunks_, tuning),
                                       tuning.defer_combine, one};
  auto it = attention_.find(key);
  if (it == attention_.end()) {
    const auto& p = model_.pipelines();
    it = attention_.emplace(key, ops::make_pipeline(ctx_, ops::plan_attention_decode_sequences(p.target, p.dims, model_.context_length(),
                                                                                              attention_chunks_, tuning, one)))
             .first;
  }
  return it->second;
}

std::unique_ptr<rt::Graph> BitNetBatchDecoder::record_step(uint32_t lanes, const BlockProjections& proj) {
  auto graph = std::make_unique<rt::Graph>(ctx_, rt::GraphOptions{timestamps_, fmt::format("batch of {}", lanes)});
  record_layers(*graph, lanes, proj);
  graph->finish();
  return graph;
}

std::unique_ptr<rt::Graph> BitNetBatchDecoder::record_one_lane(const Step& step, const Tail& tail) {
  auto graph = std::make_unique<rt::Graph>(ctx_, rt::GraphOptions{timestamps_, "batch of 1 with its tail"});
  record_layers(*graph, step.lanes, *step.projections);
  record_tail_into(*graph, tail.rows, tail);
  graph->finish();
  return graph;
}

void BitNetBatchDecoder::record_layers(rt::Graph& g, uint32_t lanes, const BlockProjections& proj) {
  const auto& c = model_.config();
  const auto& pp = pp_;
  const auto& w = model_.weights_;
  const auto& a = *model_.act_;
  Lanes& L = *lanes_;
  const float eps = c.rms_norm_eps;
  const ops::PlannedPipeline& attention = attention_for(lanes, proj);
  // The step's inputs from the staging half of its parity, and each lane's embedding: its token
  // as the host gave it, or where the step before left it (TokenSource order).
  std::vector<rt::Arg> embedding = {{"counter", L.step_count}, {"staging", L.in_staging}, {"inputs", L.inputs},
                                    {"fed_0", L.chosen}, {"fed_1", L.list_token}, {"fed_2", L.full_best},
                                    {"fed_3", L.sampled}, {"x", L.x}};
  for (size_t i = 0; i < w.token_embd.parts.size(); ++i)
    embedding.push_back({"table_" + std::to_string(i), w.token_embd.parts[i]});
  embedding_->dispatch(g, embedding, rt::push(lanes), lanes);
  const BlockActivations acts{L.x, L.q8, L.act, L.q, L.k, L.v, L.attn, L.ffn, proj.gate_up_apart() ? &L.up : nullptr};
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    // Every lane's RoPE and cache row (in QKV's epilogue, or a dispatch of their own), then its
    // attention over its own slot's rows.
    const std::vector<rt::Arg> rope = {{"sequences", L.sequences}, {"rope_table", a.rope_table}, {"k_cache", L.k_cache[l]},
                                       {"v_cache", L.v_cache[l]}};
    record_block_layer(g, proj, pp.norm_quantize, w.layers[l], acts, lanes, eps, [&] {
      if (!proj.qkv_rope) {
        std::vector<rt::Arg> args = rope;
        args.insert(args.end(), {{"q", L.q}, {"k", L.k}, {"v", L.v}});
        rope_kv_.dispatch(g, args, rt::push(lanes), lanes);
      }
      attention.dispatch(g, {{"sequences", L.sequences}, {"q", L.q}, {"k_cache", L.k_cache[l]}, {"v_cache", L.v_cache[l]},
                              {"partials", L.partials}, {"counters", L.counters}, {"out", L.attn}},
                          rt::push(lanes), lanes);
    }, proj.qkv_rope ? rope : std::vector<rt::Arg>{}, {{"attention_step", L.sequences}, {"attention_partials", L.partials}});
  }
}

// The tail for the first `rows` lanes (the lanes whose outputs the step returns come first), a
// grid row per lane: the final norm, then the pruned head's argmax (greedy outputs; each row's
// token picked by its last candidates workgroup) or its candidate lists and their draws, and/or
// every logit with its argmax, top-k and draws (the others).
std::unique_ptr<rt::Graph> BitNetBatchDecoder::record_tail(uint32_t rows, const Tail& tail) {
  auto graph = std::make_unique<rt::Graph>(ctx_, rt::GraphOptions{timestamps_, fmt::format("batch tail of {}", rows)});
  record_tail_into(*graph, rows, tail);
  graph->finish();
  return graph;
}

void BitNetBatchDecoder::record_tail_into(rt::Graph& g, uint32_t rows, const Tail& tail) {
  const auto& c = model_.config();
  const auto& p = model_.pipelines();
  const auto& w = model_.weights_;
  Lanes& L = *lanes_;
  const float eps = c.rms_norm_eps;
  const SplitMatrix& table = w.lm_head();
  const uint32_t stride = uint32_t(L.logits_stride / 4);  // floats between two rows' logits (and upper bounds)
  // `args` and the parts of a table split over bindings table0, table1, ...
  auto with_parts = [](std::vector<rt::Arg> args, const std::vector<rt::Buffer>& parts) {
    for (size_t i = 0; i < parts.size(); ++i) args.push_back({"table" + std::to_string(i), parts[i]});
    return args;
  };
  auto with_table = [&](std::vector<rt::Arg> args) { return with_parts(std::move(args), table.parts); };
  // The final norm: lm_head_input's xn is rms_norm's, bit for bit.
  if (pruned_head_)
    head_input_->dispatch(g, {{"x", L.x}, {"weight", w.output_norm}, {"xn", L.xn}, {"xq", L.xq}, {"stats", L.head_stats}},
                          rt::push(eps), rows);
  else
    p.output_norm.dispatch(g, {{"x", L.x}, {"weight", w.output_norm}, {"out", L.xn}}, rt::push(eps), rows);
  if (tail.kind.pruned || tail.kind.listed) {
    // Every lane's bounds from the int8 shadow (read once for all lanes on tensor cores, else once
    // per lane), then each lane's rows that may win (or be among its k best), exactly as lm_head
    // computes them.
    const GreedyHead& shadow = *model_.greedy_head_;
    std::vector<rt::Arg> bounds = with_parts({{"xq", L.xq}, {"stats", L.head_stats}, {"scale", shadow.scale}, {"bound", shadow.bound},
                                              {"upper", L.upper}, {"lower", L.lower}},
                                             shadow.parts);
    if (tail.bounds)
      tail.bounds->dispatch(g, bounds, rt::push(rows, stride), rows);
    else
      head_bounds_->dispatch(g, bounds, rt::push(stride), rows);
    if (tail.kind.pruned) {
      const ops::PlannedPipeline& candidates = tail.bounds ? *head_candidates_coopmat_ : *head_candidates_;  // their lower bounds' count
      candidates.dispatch(g, with_table({{"x", L.xn}, {"upper", L.upper}, {"lower", L.lower}, {"part_values", L.arg_values},
                                         {"part_indices", L.arg_indices}, {"counter", L.pick_counters}, {"token", L.chosen}}),
                          rt::push(stride), rows);
    } else {
      const ops::PlannedPipeline& list = tail.bounds ? *head_list_coopmat_ : *head_list_;
      list.dispatch(g, with_table({{"x", L.xn}, {"upper", L.upper}, {"lower", L.lower}, {"params", L.sample_params},
                                   {"list_values", L.list_values}, {"list_indices", L.list_indices}, {"list_count", L.list_count}}),
                    rt::push(stride), rows);
      sample_list_->dispatch(g, {{"list_values", L.list_values}, {"list_indices", L.list_indices}, {"list_count", L.list_count},
                                 {"params", L.sample_params}, {"top_values", L.list_top_values}, {"top_indices", L.list_top_indices},
                                 {"token", L.list_token}, {"list_length", L.list_length}, {"best", L.list_best}},
                             rt::push(stride), rows);
    }
  }
  // Last: the outputs' tokens to the staging half of the step's parity, and the step counted.
  auto finish = [&] { stage_outputs_->dispatch(g, {{"counter", L.step_count}, {"src", L.token_sources}, {"dst", L.out_staging}}); };
  if (!tail.kind.full) {
    finish();
    return;
  }
  // The LM head reads the table once for every row.
  if (tail.head) {
    const uint32_t vec4s = ops::lm_head_coopmat_tokens(p.target, rows) * c.dim / 4;
    pack_half_->dispatch(g, {{"x", L.xn.slice(0, 16ull * vec4s)}, {"y", L.xh.slice(0, 8ull * vec4s)}}, rt::push(vec4s), vec4s);
    tail.head->dispatch(g, {{"x", L.xh}, {"table0", table.parts[0]}, {"logits", L.logits}}, rt::push(stride));
  } else {
    lm_head_->dispatch(g, with_table({{"x", L.xn}, {"logits", L.logits}}), rt::push(rows, stride));
  }
  // Every row's argmax (and candidates) in one dispatch per pass, a row of the grid per row.
  argmax_partial_.dispatch(g, {{"values", L.logits}, {"part_values", L.full_values}, {"part_indices", L.full_indices}},
                           rt::push(stride), rows);
  if (tail.kind.top_k)
    top_k_partial_->dispatch(g, {{"values", L.logits}, {"part_values", L.top_part_values}, {"part_indices", L.top_part_indices}},
                             rt::push(stride), rows);
  argmax_final_.dispatch(g, {{"part_values", L.full_values}, {"part_indices", L.full_indices}, {"token", L.full_best}}, {}, rows);
  if (tail.kind.top_k)
    top_k_merge_->dispatch(g, {{"part_values", L.top_part_values}, {"part_indices", L.top_part_indices},
                               {"top_values", L.top_values}, {"top_indices", L.top_indices}},
                           {}, rows);
  if (tail.kind.top_k)
    sample_->dispatch(g, {{"top_values", L.top_values}, {"top_indices", L.top_indices}, {"params", L.sample_params},
                          {"token", L.sampled}},
                      {}, rows);
  if (tail.kind.vocabulary) {
    // The rows that draw over every logit (top_k 0) write their token (over sample_candidates'
    // where the tail ran it); the kernels leave the other rows alone.
    for (uint32_t pass = 0; pass < ops::kVocabPasses; ++pass) {
      vocab_mass_histogram_[pass].dispatch(g, {{"logits", L.logits}, {"best", L.full_best}, {"params", L.sample_params},
                                               {"state", L.vocab_state}, {"mass", L.vocab_mass}},
                                           rt::push(stride), rows);
      vocab_mass_select_[pass].dispatch(g, {{"params", L.sample_params}, {"mass", L.vocab_mass}, {"state", L.vocab_state}}, {}, rows);
    }
    vocab_draw_partial_->dispatch(g, {{"logits", L.logits}, {"best", L.full_best}, {"params", L.sample_params}, {"state", L.vocab_state},
                                      {"part_values", L.vocab_part_values}, {"part_indices", L.vocab_part_indices}},
                                  rt::push(stride), rows);
    vocab_draw_final_->dispatch(g, {{"part_values", L.vocab_part_values}, {"part_indices", L.vocab_part_indices},
                                    {"params", L.sample_params}, {"token", L.sampled}},
                                {}, rows);
  }
  // Last before the count moves on: the log-probabilities of the tokens chosen above, into the
  // staging half of this step's parity.
  if (tail.kind.logprob_top) {
    logprob_top_partial_->dispatch(g, {{"values", L.logits}, {"part_values", L.logprob_part_values},
                                       {"part_indices", L.logprob_part_indices}},
                                   rt::push(stride), rows);
    logprob_top_merge_->dispatch(g, {{"part_values", L.logprob_part_values}, {"part_indices", L.logprob_part_indices},
                                     {"top_values", L.logprob_top_values}, {"top_indices", L.logprob_top_indices}},
                                 {}, rows);
    token_logprobs_->dispatch(g, {{"counter", L.step_count}, {"logits", L.logits}, {"sources", L.token_sources},
                                  {"select", L.logprob_select}, {"top_values", L.logprob_top_values},
                                  {"top_indices", L.logprob_top_indices}, {"out", L.logprob_staging}},
                              rt::push(stride), rows);
  } else if (tail.kind.logprobs) {
    token_logprobs_bare_->dispatch(g, {{"counter", L.step_count}, {"logits", L.logits}, {"sources", L.token_sources},
                                       {"select", L.logprob_select}, {"out", L.logprob_staging}},
                                   rt::push(stride), rows);
  }
  finish();
}

}  // namespace bdsl::bitnet
