// BitNet b1.58 decoding many sequences at once (models::BatchDecoder) over one BitNetModel's
// weights. A step of B sequences is one recorded command buffer, replayed: the token ids and
// positions live in host-visible buffers, so nothing is re-recorded.
//
// In a step the projections run as the prompt path does (record_block_layer): RMSNorm + int8 per
// token, then every weight is read once for the whole batch by the matrix-matrix kernels, sized
// for the bucket (ProjectionChoice: the subgroup matmul for a few lanes, tensor cores for many). RoPE
// with the KV-cache write (in the QKV epilogue where QKV is one subgroup-matmul dispatch, else a
// dispatch of its own) and attention take each token's position and cache rows from its
// sequence record (ops/common/step_state.h), one dispatch for all; attention leaves the merge of
// a token's chunks to attn_output or attn_sub_norm's quantize (BatchOptions::defer_attention_combine;
// buckets whose projections normalize in tiles of several tokens take attention's own combine). The tail runs a grid row per
// output: greedy outputs take the pruned LM head where the model holds its int8 shadow
// (BatchOptions::pruned_head: the shadow's bounds, on int8 tensor cores for all lanes at once where
// the device has them, then each lane's candidate rows exactly: the argmax of lm_head's f32
// logits, as decode_greedy picks it); the others every logit (ops/head/lm_head_coopmat.h on tensor
// cores, else ops/head/lm_head_batch.h), argmax, top-k and draws.
// Every sequence's arithmetic is the same whatever else is in the batch, so its tokens are too.
//
// With the model's top-k, the tail samples every output on the device under its entry's settings.
// An output drawn from its top-k takes the pruned head too where the model has it (BatchOptions::
// pruned_head): each lane's list of the rows that may be among its k best, their exact f32 logits
// and the draw from them (ops/head/lm_head_pruned.h's lm_head_candidate_list_rows, then
// sample_candidate_list_rows): the logits and the draw decode_sampled takes, whatever else the
// step carries. Greedy outputs in such a step take the same list (its best row: their argmax).
// Without the pruned head, outputs draw from the full head's top-k (ops/head/sample_candidates.h);
// an entry with top_k 0 draws over every logit (ops/head/sample_vocabulary.h, in a tail recorded
// with it for the steps that have one, whose full head is lm_head_batch's f32 arithmetic even
// where the device has tensor cores: decode_sampled's logits, so its draw). A step reads back one
// token per output.
//
// Entry i of a step is lane i of the recorded batch, whatever its slot: a step of n entries runs
// the smallest bucket of at least n lanes. Lanes past the entries compute at a position past the
// context, which writes no cache row.
//
// Steps are pipelined (models::BatchDecoder::submit): a step's first dispatch (its embedding,
// ops::embedding_lookup_fed) copies its inputs from the half of a staging buffer its parity
// picks, and its tail's last dispatch copies its tokens out to the half of another
// (ops::parity_copy; the parity is a count of steps run kept on the device), so that the next
// step can be queued while it runs; an entry that takes its token from the step before
// (Entry::previous) has its embedding read it where that step's tail left it. The host then only
// reads the tokens.
//
// A short prompt (up to BatchOptions::prompt_lanes tokens) may run as lanes of decode steps,
// beside the decoding sequences: its tokens are entries of its slot at consecutive positions.
// RoPE writes every lane's cache row before attention reads any, so a prompt token attends to the
// rows its run wrote in the same step; each token's arithmetic is a decode lane's, so a
// sequence's results do not depend on how its prompt was split over steps or what ran beside it.
// The steps have prompt_lanes lanes more than slots for them.
//
// A longer prompt chunk runs through the model's own prefill graph (its single-sequence cache),
// and the rows it wrote are copied into the slot's cache; the slot's earlier rows are copied in
// first when the model's cache holds another sequence.
#pragma once
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "models/batch_decoder.h"
#include "models/bitnet/bitnet_model.h"
#include "models/bitnet/prefill_pipelines.h"
#include "ops/attention.h"
#include "runtime/graph.h"
#include "runtime/pipeline.h"

namespace bdsl::bitnet {

struct BatchOptions {
  // The layout of every bucket's projections; none: the model's prefill layout (ModelOptions).
  std::optional<PrefillProjections> projections;
  // Buckets of up to this many lanes run the subgroup matmul, larger ones the tensor cores where
  // the device has them; 0: ops/tuning.h's step_subgroup_max_tokens.
  uint32_t subgroup_max_tokens = 0;
  uint32_t coop_row_subgroups = 0, coop_token_subgroups = 0;  // tensor-core tiles (0: ops/tuning.h's)
  int coop_double_buffer = -1;  // 0 or 1 (-1: ops/tuning.h's)
  // Buckets of up to this many lanes normalize inside the projections (0: ops/tuning.h's
  // step_norm_fused_max_tokens; -1: never), the same bits either way.
  int norm_fused_max_tokens = 0;
  // Buckets whose QKV is one subgroup-matmul dispatch rotate q and k and write the cache rows in
  // its epilogue (ternary_matmul_qkv_rope): one dispatch fewer a layer, the same bits.
  bool rope_in_qkv = true;
  uint32_t attention_chunks = 0;  // each sequence's positions in at most this many chunks (0: ops/tuning.h's)
  uint32_t attention_head_split = 0;        // workgroups per KV head (0: ops/tuning.h's)
  uint32_t attention_positions_per_pass = 0;  // (0: the model's decode attention's)
  // Buckets of more lanes than attention_spread_lanes take attention_chunks_per_workgroup chunks
  // in each workgroup, one after the other, the smaller ones a workgroup a chunk and
  // attention_spread_head_split workgroups per KV head: the same bits (0: ops/tuning.h's).
  uint32_t attention_spread_lanes = 0, attention_chunks_per_workgroup = 0;
  uint32_t attention_spread_head_split = 0;
  // Attention leaves its chunks' combine to the next step, as the single-sequence decode graph
  // does: attn_output's norm prologue merges them where the projections normalize their input in
  // tiles of one token (the one-lane bucket), attn_sub_norm's quantize where they read quantized
  // input (ops::attention_output_quantize); projections that normalize in tiles of several tokens
  // take attention's own combine. No counter, no last workgroup's second pass; the same bits
  // (every bucket cuts a sequence's positions into the same whole-pass chunks and merges them
  // with the same arithmetic). false: attention combines them itself in every bucket.
  bool defer_attention_combine = true;
  // attn_output's rows per subgroup where it merges (0: the single-sequence decode graph's): the
  // same bits.
  uint32_t merging_attn_output_rows = 0;
  // Rows per subgroup of the other projections in buckets of several lanes that normalize in the
  // projections (0: ops/tuning.h's step_rows_per_subgroup): the same bits.
  uint32_t step_rows_per_subgroup = 0;
  // Tokens a workgroup there (0: ops/tuning.h's step_norm_tile_tokens): the same bits.
  uint32_t step_norm_tile = 0;
  // Blocks of 128 columns a workgroup of the tensor-core steps' projections, their reduction
  // split between workgroups (-1: ops/tuning.h's step_coop_blocks_per_split within its limits;
  // 0: no split; above 0: every such projection of every bucket splits). The same bits.
  int coop_blocks_per_split = -1;
  // The full LM head on tensor cores (ops/head/lm_head_coopmat.h: x rounded to F16, as bitnet.cpp's
  // CPU path does) where the device has them, in tails without draws over the vocabulary (those
  // take lm_head_batch, whose logits the draw's bits depend on); else, or with false,
  // lm_head_batch (lm_head's f32 arithmetic, bit for bit).
  bool tensor_core_head = true;
  // Greedy outputs from the LM head's int8 shadow and the rows that may win (ops/head/
  // lm_head_pruned.h; the bounds on int8 tensor cores where the device has them): the argmax of
  // lm_head's exact f32 logits, as the single-sequence decode_greedy picks it, without every
  // logit. Needs the model's shadow (ModelOptions::greedy_head); false, or without it: the argmax
  // of the full head's logits.
  bool pruned_head = true;
  // Lanes a step has beyond the slots, for prompt tokens; prompts of up to this many tokens may run
  // in steps (max_step_prompt). 0: every prompt goes through prefill().
  uint32_t prompt_lanes = 64;
  // decode() returns each output's top-k candidates too (StepOutput::top_ids/top_logits), and every
  // logit of an output drawn over the vocabulary or asking for log-probabilities (StepOutput::logits,
  // those the draw and the log-probabilities were taken from), not only the tokens the
  // device chose: for tests and tools that look at them; a server needs none. They come from the
  // full head: on tensor cores (x in F16; not in a tail with draws over the vocabulary) they may
  // differ in the last bits from the f32 logits that a greedy or top-k output's token is taken
  // from (the pruned head's), and so may its top_ids[0].
  // submit() then waits for its step (the candidates are read before the next step runs).
  bool return_candidates = false;
};

class BitNetBatchDecoder final : public models::BatchDecoder {
 public:
  // `slots` sequences of up to the model's context each. Throws, naming the sizes, when their
  // caches do not fit next to what the device already holds.
  BitNetBatchDecoder(rt::Context& ctx, BitNetModel& model, uint32_t slots, const BatchOptions& options = {});
  ~BitNetBatchDecoder() override;

  uint32_t slots() const override { return slots_; }
  uint32_t context_length() const override { return model_.context_length(); }
  uint32_t vocab_size() const override { return model_.vocab_size(); }
  uint32_t top_k() const override { return model_.top_k(); }
  uint32_t max_prefill_chunk() const override { return BitNetModel::kMaxPrefillBlock; }
  uint64_t device_bytes() const override { return device_bytes_; }
  uint32_t step_capacity() const override { return capacity_; }
  uint32_t max_step_prompt() const override { return options_.prompt_lanes; }
  // On the device (ops/head/token_logprobs.h) from lm_head_batch's f32 logits; a prefill's
  // output's on the host from the model's logits.
  bool has_logprobs() const override { return true; }
  uint32_t max_top_logprobs() const override { return top_logprobs_; }

  // Waits for the steps in flight first (they may write the slot's cache).
  models::StepOutput prefill(uint32_t slot, std::span<const int32_t> tokens, uint32_t pos,
                             const models::SamplerOptions& sampling = {}, int32_t logprobs = -1,
                             const models::PromptScoring& scoring = {}) override;
  // The chunk runs once, in the model's graph; its rows are copied into every sharer's slot.
  std::vector<models::StepOutput> prefill_shared(std::span<const Sharer> sharers, std::span<const int32_t> tokens,
                                                 uint32_t pos) override;
  std::vector<models::StepOutput> decode(std::span<const Entry> batch) override;
  uint64_t submit(std::span<const Entry> batch) override;
  std::vector<models::StepOutput> collect(uint64_t ticket) override;

  // Builds and records every bucket's step now (else each is made at its first step): a server
  // calls it before it takes requests, so that none waits for a compile.
  void record_all_buckets();
  // The bucket (lanes of the recorded step) that a step of `entries` entries runs: as many lanes
  // where a step's projections normalize in their workgroups (ops/tuning.h's
  // step_norm_fused_max_tokens: up to 8), else the next power of two.
  uint32_t bucket_for(uint32_t entries) const;
  // Of a bucket's step whose every lane returns an output (a decode step), each drawn under
  // `sampling`: both recordings' dispatches and barrier-separated steps, GPU times, names and
  // spans, layers then tail.
  rt::GraphStats step_stats(uint32_t bucket, const models::SamplerOptions& sampling = {}) const;
  std::vector<double> step_timestamps_ns(uint32_t bucket, const models::SamplerOptions& sampling = {}) const;
  double step_gpu_span_ns(uint32_t bucket, const models::SamplerOptions& sampling = {}) const;
  // The bucket's recorded step and greedy tail replayed `n` times back to back, the host doing
  // nothing between them (the inputs of the last decode() again): the device's time a step
  // without the host's turnaround (bench/, decode_batch_device/).
  void replay_greedy_steps(uint32_t bucket, uint32_t n);
  std::vector<std::string> step_operation_names(uint32_t bucket, const models::SamplerOptions& sampling = {}) const;

  // GPU timestamps in the step recordings (bitnet-dsl-bench); before the first decode().
  void set_timestamps(bool on) { timestamps_ = on; }

 private:
  struct Lanes;  // the batch's device buffers (all lanes, all slots' caches)
  // A step is two recordings submitted back to back: the layers of every lane, then the tail
  // (final norm, LM head, argmax, top-k) of the lanes that return an output, which come first.
  struct Step {
    uint32_t lanes = 0;
    std::unique_ptr<BlockProjections> projections;  // sized for this bucket (ProjectionChoice)
    std::unique_ptr<rt::Graph> graph;               // embedding and layers
  };
  // What a tail computes. pruned: the pruned head's argmax (greedy outputs' tokens); listed: the
  // pruned head's candidate list and draw for every row (the outputs drawn from their top-k, and
  // the greedy ones beside them); full: every logit, its argmax (the other outputs' argmax) and
  // the top-k and draws of sampled outputs (top_k: the full head's top-k and draw from it, for
  // outputs drawn from their top-k without the lists, and returned candidates); vocabulary: also
  // the draw over every logit, for outputs with top_k 0; logprobs: every logit and the
  // log-probabilities of the outputs that ask for them (Entry::logprobs), with logprob_top the
  // alternatives' (a top-k of their own).
  struct TailKind {
    bool pruned = false, listed = false, full = true, top_k = false, vocabulary = false, logprobs = false, logprob_top = false;
    bool operator==(const TailKind&) const = default;
  };
  struct Tail {
    uint32_t rows = 0;
    TailKind kind;
    const ops::PlannedPipeline* head = nullptr;    // the tensor-core LM head for this many rows
    const ops::PlannedPipeline* bounds = nullptr;  // the pruned head's tensor-core bounds for this many rows
    std::unique_ptr<rt::Graph> graph;
    // A one-row tail with the one-lane bucket's layers before it, one submission a step (two cost
    // the one-lane step a queue round trip): made at its first use.
    std::unique_ptr<rt::Graph> with_layers;
  };
  // Where a tail leaves each output's token: the fed sources of the next step's embedding
  // (ops::embedding_lookup_fed, in this order) and the rows of the outputs' staging buffer.
  enum class TokenSource : uint32_t { Pruned, Listed, FullArgmax, FullSampled, ListedBest };
  static constexpr uint32_t kFedSources = 4, kTokenSources = 5;
  static constexpr uint32_t kNoOutput = UINT32_MAX;
  TokenSource token_source(const TailKind& kind, const models::SamplerOptions& sampling) const;
  // A submitted step not yet collected.
  struct InFlight {
    uint64_t ticket = 0;
    rt::Graph *step = nullptr, *tail = nullptr;  // its recordings and their replays
    uint64_t step_ticket = 0, tail_ticket = 0;
    uint32_t parity = 0, outputs = 0;
    std::vector<Entry> batch;
    std::vector<uint32_t> lane_of;  // the entries with an output take the first `outputs` lanes
    bool has_output(size_t entry) const { return lane_of[entry] < outputs; }
    TailKind kind;
    std::vector<models::StepOutput> candidates;  // read at submit() (BatchOptions::return_candidates)
  };
  void wait_in_flight();  // every submitted step done on the device
  // A staging half's tokens and sequence records for every lane away (token 0, past the context:
  // no cache row written); the sampling settings are left as they are.
  void stage_away(std::span<uint32_t> half) const;
  std::vector<models::StepOutput> read_candidates(const InFlight& f);
  // Output row `row`'s log-probabilities (its token `token`) with `top` alternatives, where the
  // tail of step `f` left them.
  models::TokenLogprobs read_logprobs(const InFlight& f, uint32_t row, uint32_t top, int32_t token) const;
  Step& step_for(uint32_t lanes);
  // The attention pipeline of a bucket of `lanes` with these projections, made at its first use.
  const ops::PlannedPipeline& attention_for(uint32_t lanes, const BlockProjections& projections);
  Tail& tail_for(uint32_t rows, TailKind kind);
  // The tail a step's outputs need: `greedy`, whether any is greedy; `sampled`, whether any draws
  // from its top-k; `vocabulary`, whether any draws over every logit; `logprobs`, whether any asks
  // for log-probabilities; `logprob_top`, whether any asks for alternatives too.
  TailKind tail_kind(bool greedy, bool sampled, bool vocabulary, bool logprobs = false, bool logprob_top = false) const;
  std::unique_ptr<rt::Graph> record_step(uint32_t lanes, const BlockProjections& projections);
  std::unique_ptr<rt::Graph> record_tail(uint32_t rows, const Tail& tail);
  // The one-lane bucket's layers and `tail` in one command buffer (Tail::with_layers).
  std::unique_ptr<rt::Graph> record_one_lane(const Step& step, const Tail& tail);
  void record_layers(rt::Graph& g, uint32_t lanes, const BlockProjections& projections);
  void record_tail_into(rt::Graph& g, uint32_t rows, const Tail& tail);
  // The recordings a step of `bucket` lanes, all of them with outputs drawn under `sampling`,
  // runs: layers, tail (null: not made yet).
  std::array<const rt::Graph*, 2> recorded(uint32_t bucket, const models::SamplerOptions& sampling = {}) const;
  ProjectionChoice projection_choice(uint32_t lanes) const;  // the projections of a bucket of `lanes`
  void copy_rows(bool into_slot, uint32_t slot, uint32_t first, uint32_t count);
  // One prefill chunk for every sharer (their first slot's rows 0..pos-1 in the model's cache),
  // scored where `scoring` says so.
  std::vector<models::StepOutput> run_prefill(std::span<const Sharer> sharers, std::span<const int32_t> tokens, uint32_t pos,
                                              const models::PromptScoring& scoring);

  rt::Context& ctx_;
  BitNetModel& model_;
  uint32_t slots_;
  BatchOptions options_;
  uint32_t capacity_;  // lanes of the largest bucket: slots_ + options_.prompt_lanes
  // Buckets of every size up to this (those whose projections normalize a token a workgroup: the
  // same kernels at any size, and no lane computes for nothing), powers of two past it.
  uint32_t exact_buckets_ = 1;
  PrefillProjections layout_;
  uint64_t device_bytes_ = 0;
  bool timestamps_ = false;
  const PrefillPipelines& pp_;  // the model's own: its embedding and norm + quantize
  ops::PlannedPipeline rope_kv_;    // every lane's RoPE and cache row (ops::rope_kv_write_sequences)
  ops::SplitKvTuning attention_tuning_;
  uint32_t attention_chunks_;  // each sequence's positions in at most this many chunks
  // Attention's shape by bucket (ops::attention_decode_sequences, every lane over its own slot's
  // rows): buckets of more than spread_lanes_ lanes take per_workgroup_ chunks a workgroup, the
  // others spread_split_ workgroups per KV head, or merging_split_ where attn_output merges.
  uint32_t spread_lanes_ = 0, per_workgroup_ = 1, spread_split_ = 1, merging_split_ = 1;
  // What a consumer of the deferred partials needs (BatchOptions::defer_attention_combine).
  std::optional<ops::AttentionPartialsInput> deferred_partials_;
  bool head_on_tensor_cores_;
  std::optional<ops::PlannedPipeline> pack_half_;  // xn -> F16 for the tensor-core head
  std::optional<ops::PlannedPipeline> lm_head_;    // else every lane's logits from one read of the table (lm_head_batch)
  ops::PlannedPipeline argmax_partial_, argmax_final_;           // a grid row per lane
  // Every lane's embedding, its token given or fed by the step before, with the step's inputs
  // from their staging half; the outputs' tokens out to theirs (ops::parity_copy).
  std::optional<ops::PlannedPipeline> embedding_, stage_outputs_;
  std::optional<ops::PlannedPipeline> top_k_partial_, top_k_merge_;  // with the model's top-k
  std::optional<ops::PlannedPipeline> sample_;  // each output's token under its entry's sampling
  // The pruned head (BatchOptions::pruned_head), a grid row per lane: the final norm with x in int8,
  // the bounds (here, or per tail on tensor cores) and the candidates' exact logits.
  bool pruned_head_ = false, bounds_on_tensor_cores_ = false;
  std::optional<ops::PlannedPipeline> head_input_, head_bounds_, head_candidates_;
  std::optional<ops::PlannedPipeline> head_candidates_coopmat_;  // after the tensor-core bounds (their lower bounds)
  // Sampling's pruned head (with the model's top-k): each row's candidate list after either
  // bounds pass, and the draw from it.
  bool listed_head_ = false;
  std::optional<ops::PlannedPipeline> head_list_, head_list_coopmat_, sample_list_;
  // Outputs with top_k 0: the draw over every logit (ops/head/sample_vocabulary.h), a row each.
  std::vector<ops::PlannedPipeline> vocab_mass_histogram_, vocab_mass_select_;
  std::optional<ops::PlannedPipeline> vocab_draw_partial_, vocab_draw_final_;
  // Outputs' log-probabilities, with up to top_logprobs_ alternatives (kMaxTopLogprobs, from a
  // top-k of that many) or none (bare), into the staging half of their step's parity.
  uint32_t top_logprobs_ = 0;
  std::optional<ops::PlannedPipeline> logprob_top_partial_, logprob_top_merge_, token_logprobs_, token_logprobs_bare_;
  std::unique_ptr<Lanes> lanes_;
  // The tails' pipelines that depend on the row count, by row count (shared by every kind; before
  // the recordings, which outlive them otherwise).
  std::map<uint32_t, ops::PlannedPipeline> coopmat_heads_, coopmat_bounds_;
  // The steps' attention pipelines by (head split, chunks a workgroup, deferred chunks, one sequence).
  std::map<std::array<uint32_t, 4>, ops::PlannedPipeline> attention_;
  std::deque<InFlight> in_flight_;
  uint64_t tickets_ = 0;
  uint64_t steps_run_ = 0;  // tails submitted: the device's step count (the next step's parity)
  // Per entry of the step submitted last: where its output's token is (an ops::fed_token_word),
  // or kNoOutput.
  std::vector<uint32_t> previous_fed_;
  std::vector<Step> steps_;  // recorded buckets, by lane count
  std::vector<Tail> tails_;  // recorded tails, by row count (at most slots_) and kind
  // Whose rows the model's own cache holds: slot and how many positions (none: UINT32_MAX).
  uint32_t model_slot_ = UINT32_MAX, model_rows_ = 0;
};

}  // namespace bdsl::bitnet
