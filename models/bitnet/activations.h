// The device buffers of one decode token (activations, the KV cache, what is read back): internal
// to models/bitnet, shared by the decode and the prefill recordings.
#pragma once
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <fmt/format.h>

#include <vector>

#include "models/bitnet/bitnet_model.h"
#include "models/numerics/rope.h"
#include "ops/attention.h"
#include "ops/common.h"
#include "ops/head.h"

namespace bdsl::bitnet {

inline uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

struct BitNetModel::Activations {
  Activations(rt::Context& ctx, const models::BitNetConfig& c, const BitNetPipelines& p) {
    auto f32 = [&](uint64_t n, const char* name) { return rt::Buffer(ctx, n * 4, {.name = name, .holds = ScalarKind::F32}); };
    auto u32 = [&](uint64_t n, const char* name, bool host_visible = false) {
      return rt::Buffer(ctx, n * 4, {.host_visible = host_visible, .name = name, .holds = ScalarKind::U32});
    };
    const auto& d = p.dims;
    step = rt::Buffer(ctx, sizeof(ops::StepState),  // read by ~60 dispatches
                      {.host_visible = true, .name = "step state", .gpu_reads_often = true, .holds = ScalarKind::U32});
    // RoPE's (cos, sin) for every position, as the CPU reference rounds them (ops/common/rope_rotation.h).
    rope_table = f32(uint64_t{c.context_length} * d.head_dim, "rope table");
    rope_table.upload(numerics::rope_table(c.context_length, d.head_dim, c.rope_freq_base));
    x = f32(c.dim, "x (residual)");
    q = f32(d.q_width(), "q");
    k = f32(d.kv_width(), "k");
    v = f32(d.kv_width(), "v");
    attn = f32(d.q_width(), "attention out");
    attn_used = f32(d.q_width(), "attention out as attn_output read it");
    ffn = f32(c.ffn_dim, "ffn");
    xn = f32(c.dim, "output norm");
    logits = f32(c.vocab_size, "logits");
    const uint64_t cache_bytes = uint64_t{c.context_length} * d.kv_words() * 4;
    for (uint32_t l = 0; l < c.n_layers; ++l) {
      k_cache.emplace_back(ctx, cache_bytes, rt::BufferOptions{.name = fmt::format("k cache {}", l), .holds = ScalarKind::U32});
      v_cache.emplace_back(ctx, cache_bytes, rt::BufferOptions{.name = fmt::format("v cache {}", l), .holds = ScalarKind::U32});
    }
    partials = rt::Buffer(ctx, ops::attention_partials_bytes(d, p.attention_chunks, 1), {.name = "attention partials", .holds = ScalarKind::F32});
    counters = u32(ops::attention_counters_bytes(d, 1) / 4, "attention counters");
    counters.fill(0);
    arg_values = f32(p.argmax_plan.groups, "argmax partial values");
    arg_indices = u32(p.argmax_plan.groups, "argmax partial indices");
    token = u32(1, "argmax token", true);
    generated = u32(c.context_length, "greedy token of each position", true);
    history = u32(c.context_length, "token at each position (repeat penalty)", true);
    if (p.lm_head_bounds) {
      upper = f32(c.vocab_size, "greedy head upper bounds");
      lower = f32(ops::lm_head_bounds_workgroups(p.target, c.vocab_size), "greedy head lower bounds");
      head_counter = u32(1, "greedy head's finished workgroups");
      xq = rt::Buffer(ctx, c.dim, {.name = "greedy head's int8 x"});
      head_stats = f32(4, "greedy head's x scale and norms");
      head_counter.fill(0);  // lm_head_candidates leaves it zero
    }
    if (p.top_k) {
      top_part_values = f32(uint64_t{p.top_k_plan.groups} * p.top_k, "top-k partial values");
      top_part_indices = u32(uint64_t{p.top_k_plan.groups} * p.top_k, "top-k partial indices");
      top_values = rt::Buffer(ctx, p.top_k * 4, {.host_visible = true, .name = "top-k values", .holds = ScalarKind::F32});
      top_indices = u32(p.top_k, "top-k indices", true);
      sample_params = u32(ops::kSampleParamsWords, "sampling settings", true);
      sample_params.fill(0);  // greedy until decode_sampled says otherwise
      sampled = u32(1, "sampled token");
      vocab_state = u32(ops::kVocabStateWords, "vocabulary draw's state");
      vocab_mass = u32(2 * ops::kVocabBuckets, "vocabulary draw's buckets");
      vocab_mass.fill(0);  // each select leaves its buckets zero
      const uint32_t groups = ops::vocab_sampling_groups(p.target, c.vocab_size);
      vocab_part_values = f32(groups, "vocabulary draw's partial scores");
      vocab_part_indices = u32(groups, "vocabulary draw's partial ids");
    }
    if (p.lm_head_candidate_list) {
      list_values = f32(c.vocab_size, "sampled head's candidate logits");
      list_indices = u32(c.vocab_size, "sampled head's candidate ids");
      list_count = u32(1, "sampled head's candidates");  // device-local: every workgroup's appends count on it
      list_count.fill(0);  // sample_candidate_list leaves it zero
      list_length = u32(1, "sampled head's last list length", true);
    }
  }

  // Bytes a model of this shape needs besides its weights.
  static uint64_t bytes(const models::BitNetConfig& c) {
    const uint64_t kv = 2ull * c.n_layers * c.context_length * c.kv_dim() * 2;
    const uint64_t rope = uint64_t{c.context_length} * c.head_dim * 4;
    return kv + rope + 4ull * (4 * c.dim + 3 * c.n_heads * c.head_dim + c.ffn_dim + 6ull * c.vocab_size + 2ull * c.context_length);
  }

  // Device bytes of every buffer here (the KV cache included).
  uint64_t bytes_held() const {
    uint64_t n = 0;
    for (const rt::Buffer* b : {&step, &rope_table, &x, &q, &k, &v, &attn, &attn_used, &ffn, &xn, &logits, &partials, &counters,
                                &arg_values, &arg_indices, &token, &generated, &history, &upper, &lower, &head_counter, &xq, &head_stats,
                                &top_part_values, &top_part_indices, &top_values, &top_indices, &sample_params, &sampled,
                                &list_values, &list_indices, &list_count, &list_length, &vocab_state, &vocab_mass,
                                &vocab_part_values, &vocab_part_indices, &dumps})
      n += *b ? b->size() : 0;
    for (const auto* caches : {&k_cache, &v_cache})
      for (const auto& c : *caches) n += c.size();
    return n;
  }

  rt::Buffer step, rope_table, x, q, k, v, attn, attn_used, ffn, xn, logits;
  std::vector<rt::Buffer> k_cache, v_cache;
  rt::Buffer partials, counters;
  rt::Buffer arg_values, arg_indices, token, generated, history, upper, lower, head_counter, xq, head_stats;
  rt::Buffer top_part_values, top_part_indices, top_values, top_indices, sample_params, sampled;
  rt::Buffer list_values, list_indices, list_count, list_length;
  rt::Buffer vocab_state, vocab_mass, vocab_part_values, vocab_part_indices;
  rt::Buffer dumps;
};

// The buffers and the recording of one prompt block length (bitnet_prefill.cpp).
// The prompt path's buffers, sized once for its longest block (every block length's recording
// binds them), and the recorded graphs by block length.
struct BitNetModel::PrefillBlock {
  uint32_t capacity = 0;  // tokens
  // ffn: relu(gate)^2 * up (fused layout) or gate (separate layout, up beside it).
  rt::Buffer tokens, x, q8, act, q, k, v, attn, ffn, up, partials, counters;
  struct Recorded {
    std::unique_ptr<rt::Graph> graph;
    uint64_t last_used = 0;
  };
  // By block length, with the head or not and attention's tensor-core chunks (0: attention on
  // the FMA kernel); at most kMaxGraphs.
  std::map<std::tuple<uint32_t, bool, uint32_t>, Recorded> graphs;
  static constexpr size_t kMaxGraphs = 32;
  uint64_t uses = 0;
  const rt::Graph* last = nullptr;  // the graph of the last block run
  // prefill_all_logits: the final norm and the LM head (lm_head_batch) of kLogitRows rows of x at
  // a time, one recording per (first row, rows).
  static constexpr uint32_t kLogitRows = 32;
  std::optional<ops::PlannedPipeline> lm_head_rows;
  rt::Buffer xn_rows, logit_rows, logit_staging;  // staging: what the host reads (host-visible)
  uint64_t logit_stride = 0;  // floats between two rows' logits
  std::map<std::tuple<uint32_t, uint32_t, RowsMode>, std::unique_ptr<rt::Graph>> logit_graphs;  // (first row, rows, mode)
  // prefill_scored: the rows' next tokens and which rows are scored (ops::kNoLogprobs: not), the
  // alternatives' top-k, and the scores (the staging half of parity 0: score_counter holds 0).
  std::optional<ops::PlannedPipeline> score_top_partial, score_top_merge, score_logprobs, score_logprobs_bare;
  rt::Buffer score_counter, score_next, score_select, score_part_values, score_part_indices, score_top_values,
      score_top_indices, score_out;
};

}  // namespace bdsl::bitnet
