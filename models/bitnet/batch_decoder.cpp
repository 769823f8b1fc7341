#include "models/bitnet/batch_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include "models/bitnet/activations.h"
#include "models/bitnet/batch_lanes.h"
#include "models/bitnet/sample_settings.h"
#include "ops/attention.h"
#include "ops/common.h"
#include "ops/head.h"
#include "ops/pipeline_batch.h"
#include "ops/ternary.h"
#include "ops/tuning.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bitnet {
namespace {

// models::check_sampling, and no repeat penalty: the batched step keeps no token history.
void check_batch_sampling(const models::SamplerOptions& sampling, uint32_t top_k) {
  models::check_sampling(sampling, top_k);
  if (models::penalizes(sampling))
    throw std::invalid_argument("the repeat penalty is not available in batched decode (bitnet-dsl run has it)");
}

void check_logprobs(int32_t logprobs, uint32_t most) {
  if (logprobs > int32_t(most))
    throw std::invalid_argument(fmt::format("{} alternatives' log-probabilities asked; this decoder gives at most {}", logprobs, most));
}

uint64_t round_up(uint64_t bytes, uint64_t align) { return (bytes + align - 1) / align * align; }

// Which draws a step's outputs ask for (tail_kind's arguments): each output is greedy, drawn from
// its top-k, or drawn over the whole vocabulary; and whether any asks for log-probabilities, with
// alternatives or not.
struct Draws {
  bool greedy = false, sampled = false, vocabulary = false, logprobs = false, logprob_top = false;
  void add(const models::SamplerOptions& s, int32_t top_logprobs = -1) {
    const bool g = models::is_greedy(s), v = models::draws_over_vocabulary(s);
    greedy |= g, vocabulary |= v, sampled |= !g && !v, logprobs |= top_logprobs >= 0, logprob_top |= top_logprobs > 0;
  }
};

// The model's attention shape, with the head split the tuning table gives batched decode. Every
// bucket cuts a sequence's positions into whole passes (the split a deferred combine needs) and,
// but for the buckets that defer, combines them in the kernel.
ops::SplitKvTuning sequences_tuning(const BitNetPipelines& p, const BatchOptions& o) {
  ops::SplitKvTuning t = p.attention_tuning;
  t.defer_combine = 0;
  t.whole_pass_chunks = true;
  t.head_split = std::max(1u, o.attention_head_split ? o.attention_head_split
                                                     : ops::tuning_for(p.target).sequences_attention_head_split);
  if (o.attention_positions_per_pass) t.positions_per_pass = o.attention_positions_per_pass;
  if (p.dims.group() % t.head_split != 0) t.head_split = 1;
  return t;
}

}  // namespace


BitNetBatchDecoder::BitNetBatchDecoder(rt::Context& ctx, BitNetModel& model, uint32_t slots, const BatchOptions& options)
    : ctx_(ctx),
      model_(model),
      slots_(slots),
      options_(options),
      capacity_(slots + options.prompt_lanes),
      layout_(options.projections ? *options.projections : model.options_.prefill_projections),
      pp_(model.prefill_pipelines()),
      attention_tuning_(sequences_tuning(model.pipelines(), options)),
      attention_chunks_(std::clamp(options.attention_chunks ? options.attention_chunks
                                                            : ops::tuning_for(model.pipelines().target).sequences_attention_chunks,
                                   1u, model.pipelines().attention_chunks)),
      head_on_tensor_cores_(options.tensor_core_head &&
                            ops::lm_head_coopmat_fits(model.pipelines().target, model.vocab_size(), model.config().dim,
                                                      model.pipelines().split.parts)),
      pruned_head_(options.pruned_head && model.greedy_head_ && ops::lm_head_pruned_supported(model.config().dim)),
      bounds_on_tensor_cores_(pruned_head_ && options.tensor_core_head &&
                              ops::lm_head_bounds_coopmat_fits(model.pipelines().target, model.vocab_size(), model.config().dim,
                                                               uint32_t(model.greedy_head_->parts.size()))),
      listed_head_(pruned_head_ && model.pipelines().top_k > 0) {
  if (slots == 0) throw std::invalid_argument("a batch decoder needs at least one slot");
  while (exact_buckets_ < capacity_ && normalizes_in_projections(model.pipelines().target, projection_choice(exact_buckets_ + 1)))
    ++exact_buckets_;
  // A consumer merges every chunk in one round; attention's own combine (the buckets that cannot
  // merge) must too, or its sums round differently.
  attention_tuning_.combine_unroll = std::max(attention_tuning_.combine_unroll, attention_chunks_);
  const auto& t = model.pipelines().target;
  const auto& dims = model.pipelines().dims;
  const uint32_t vocab = model.vocab_size(), k = model.pipelines().top_k;
  ops::PipelineBatch batch;  // built together, on a pool of threads
  batch.add(ops::plan_rope_kv_write_sequences(t, dims, model.context_length()), rope_kv_);
  {
    // The attention kernels' shapes by bucket (attention_for; the same bits in every one).
    const ops::Tuning& tu = ops::tuning_for(t);
    spread_lanes_ = options.attention_spread_lanes ? options.attention_spread_lanes : tu.sequences_attention_spread_lanes;
    per_workgroup_ = options.attention_chunks_per_workgroup ? options.attention_chunks_per_workgroup
                                                            : tu.sequences_attention_chunks_per_workgroup;
    spread_split_ = options.attention_spread_head_split ? options.attention_spread_head_split : tu.sequences_attention_spread_head_split;
    if (dims.group() % spread_split_ != 0) spread_split_ = attention_tuning_.head_split;
    // Where attn_output merges the chunks (one token a projection workgroup): the single-sequence
    // decode graph's split (a workgroup per query head).
    merging_split_ = options.attention_spread_head_split ? spread_split_ : model.pipelines().attention_tuning.head_split;
    if (options.defer_attention_combine && attention_chunks_ > 1)
      deferred_partials_ = ops::AttentionPartialsInput{dims, model.context_length(), attention_chunks_,
                                                       ops::attention_pass(t, dims, attention_tuning_), attention_chunks_};
  }
  batch.add(ops::plan_argmax_partial(t, vocab, true), argmax_partial_);
  batch.add(ops::plan_argmax_final(t, vocab, 0, true), argmax_final_);
  if (k) {
    batch.add(ops::plan_top_k_partial(t, vocab, k, true), top_k_partial_);
    batch.add(ops::plan_top_k_merge(t, vocab, k, true), top_k_merge_);
    batch.add(ops::plan_sample_candidates(t, k, true), sample_);
    vocab_mass_histogram_.resize(ops::kVocabPasses);
    vocab_mass_select_.resize(ops::kVocabPasses);
    for (uint32_t pass = 0; pass < ops::kVocabPasses; ++pass) {
      batch.add(ops::plan_vocab_mass_histogram(t, vocab, pass), vocab_mass_histogram_[pass]);
      batch.add(ops::plan_vocab_mass_select(t, pass), vocab_mass_select_[pass]);
    }
    batch.add(ops::plan_vocab_draw_partial(t, vocab), vocab_draw_partial_);
    batch.add(ops::plan_vocab_draw_final(t, vocab), vocab_draw_final_);
  }
  const uint32_t rows_per_part = model.pipelines().split.rows_per_part;
  if (pruned_head_) {
    const uint32_t dim = model.config().dim;
    batch.add(ops::plan_lm_head_input(t, dim, true), head_input_);
    batch.add(ops::plan_lm_head_bounds(t, vocab, dim, rows_per_part, true), head_bounds_);
    // Each row's last candidates workgroup picks its token (no argmax_final of its own).
    batch.add(ops::plan_lm_head_candidate_rows(t, vocab, dim, rows_per_part, ops::lm_head_bounds_workgroups(t, vocab), true),
              head_candidates_);
    if (bounds_on_tensor_cores_)
      batch.add(ops::plan_lm_head_candidate_rows(t, vocab, dim, rows_per_part, ops::lm_head_bounds_coopmat_workgroups(t, vocab), true),
                head_candidates_coopmat_);
    if (listed_head_) {
      batch.add(ops::plan_lm_head_candidate_list_rows(t, vocab, dim, rows_per_part, k, ops::lm_head_bounds_workgroups(t, vocab)),
                head_list_);
      if (bounds_on_tensor_cores_)
        batch.add(ops::plan_lm_head_candidate_list_rows(t, vocab, dim, rows_per_part, k, ops::lm_head_bounds_coopmat_workgroups(t, vocab)),
                  head_list_coopmat_);
      batch.add(ops::plan_sample_candidate_list_rows(t, k), sample_list_);
    }
  }
  if (head_on_tensor_cores_) batch.add(ops::plan_pack_half(t), pack_half_);
  // lm_head_batch: the full head off tensor cores, and always for draws over the vocabulary and
  // log-probabilities (they take lm_head's f32 bits).
  batch.add(ops::plan_lm_head_batch(t, vocab, model.config().dim, model.pipelines().split.rows_per_part), lm_head_);
  // Log-probabilities: the alternatives from a top-k of their own (kMaxTopLogprobs, far cheaper
  // than the model's 128 for sampling), or none.
  top_logprobs_ = std::min(kMaxTopLogprobs, vocab);
  batch.add(ops::plan_top_k_partial(t, vocab, top_logprobs_, true), logprob_top_partial_);
  batch.add(ops::plan_top_k_merge(t, vocab, top_logprobs_, true), logprob_top_merge_);
  batch.add(ops::plan_token_logprobs(t, vocab, top_logprobs_, top_logprobs_, slots, top_logprobs_), token_logprobs_);
  batch.add(ops::plan_token_logprobs(t, vocab, 0, 0, slots, top_logprobs_), token_logprobs_bare_);
  batch.build(ctx, codegen::default_shader_cache());
  const auto& c = model.config();
  const auto& p = model.pipelines();
  const auto& d = p.dims;
  lanes_ = std::make_unique<Lanes>();
  Lanes& L = *lanes_;
  L.align = std::max<uint64_t>(ctx.info().min_storage_buffer_offset_alignment, 4);
  const uint64_t n = capacity_;  // lanes: activations are per lane, caches per slot
  // The tail's rows: a step returns at most one output per slot. The tensor-core LM head reads
  // and writes them rounded up to its token tile.
  const uint64_t outs = slots;
  const uint64_t head_rows = head_on_tensor_cores_ ? std::max<uint64_t>(outs, ops::lm_head_coopmat_tokens(p.target, slots)) : outs;
  auto make = [&](uint64_t bytes, const std::string& name, std::optional<ScalarKind> holds, bool host = false) {
    L.bytes += bytes;
    return rt::Buffer(ctx, bytes, {.host_visible = host, .name = "batch " + name, .gpu_reads_often = host, .holds = holds});
  };
  const auto f32 = ScalarKind::F32, u32 = ScalarKind::U32;
  // Bytes the caches take, checked before anything is allocated.
  L.cache_slot_bytes = uint64_t{c.context_length} * d.kv_words() * 4;
  const uint64_t cache_bytes = 2ull * c.n_layers * slots * L.cache_slot_bytes;
  const uint64_t heap = ctx.info().device_local_bytes;
  if (heap && cache_bytes > heap)
    throw std::invalid_argument(fmt::format("batched decode: {} slots of {} positions need {:.1f} GiB of KV cache, more "
                                            "than the device's {:.1f} GiB (lower --parallel or --ctx-size)",
                                            slots, c.context_length, cache_bytes / 1073741824.0, heap / 1073741824.0));
  const uint64_t largest = ctx.info().max_memory_allocation;
  const uint64_t layer_cache = uint64_t{slots} * L.cache_slot_bytes;
  if (layer_cache > ctx.info().max_storage_buffer_range)
    throw std::invalid_argument(fmt::format("batched decode: one layer's K cache for {} slots of {} positions is {:.1f} MiB, "
                                            "more than {} binds at once ({:.1f} MiB; lower --parallel or --ctx-size)",
                                            slots, c.context_length, layer_cache / 1048576.0, ctx.info().name,
                                            ctx.info().max_storage_buffer_range / 1048576.0));
  if (largest && layer_cache > largest)
    throw std::invalid_argument(fmt::format("batched decode: one layer's K cache for {} slots of {} positions is {:.1f} MiB, "
                                            "more than {} allocates at once ({:.1f} MiB; lower --parallel or --ctx-size)",
                                            slots, c.context_length, layer_cache / 1048576.0, ctx.info().name,
                                            largest / 1048576.0));
  // A step's inputs, one buffer that its first dispatch fills from the staging half of its parity:
  // the lanes' tokens, their sequence records, the outputs' sampling settings.
  {
    const uint64_t tokens_at = 0, records_at = round_up(tokens_at + 4 * n, L.align);
    const uint64_t params_at = round_up(records_at + sizeof(ops::SequenceState) * n, L.align);
    const uint64_t select_at = round_up(params_at + 4ull * ops::kSampleParamsWords * outs, L.align);
    const uint64_t bytes = round_up(select_at + 4 * outs, 4);
    L.inputs = make(bytes, "step inputs", u32);
    L.tokens = L.inputs.slice(tokens_at, 4 * n);
    L.sequences = L.inputs.slice(records_at, sizeof(ops::SequenceState) * n);
    L.sample_params = L.inputs.slice(params_at, 4ull * ops::kSampleParamsWords * outs);
    L.logprob_select = L.inputs.slice(select_at, 4 * outs);
    L.in_staging = make(2 * bytes, "step inputs' staging", u32, true);
    // Both halves defined before any step (every lane away: past the context, token 0; rows of a
    // tail past a step's outputs draw greedily from defined settings).
    const std::span<uint32_t> staging = L.in_staging.host_words();
    std::fill(staging.begin(), staging.end(), 0u);
    for (uint32_t half = 0; half < 2; ++half) stage_away(staging.subspan(half * bytes / 4, bytes / 4));
    L.step_count = make(4, "steps run", u32);
    L.step_count.fill(0);
  }
  L.x = make(4 * n * c.dim, "x", f32);
  L.q8 = make(n * std::max(c.dim, c.ffn_dim), "int8 activations", std::nullopt);
  L.act = make(8 * n, "activation scales", u32);
  L.q = make(4 * n * d.q_width(), "q", f32);
  L.k = make(4 * n * d.kv_width(), "k", f32);
  L.v = make(4 * n * d.kv_width(), "v", f32);
  L.attn = make(4 * n * d.q_width(), "attention out", f32);
  L.ffn = make(4 * n * c.ffn_dim, "gate or ffn", f32);
  L.up = make(4 * n * c.ffn_dim, "up", f32);  // for the buckets that run gate and up apart
  L.xn = make(4 * head_rows * c.dim, "output norm", f32);
  L.xn.fill(0);  // rows past the lanes feed only logits nobody reads: keep them finite
  if (head_on_tensor_cores_) L.xh = make(2 * head_rows * c.dim, "output norm in f16", std::nullopt);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    L.k_cache.push_back(make(layer_cache, fmt::format("k cache {}", l), u32));
    L.v_cache.push_back(make(layer_cache, fmt::format("v cache {}", l), u32));
  }
  L.partials = make(ops::attention_partials_bytes(d, attention_chunks_, capacity_), "attention partials", f32);
  L.counters = make(ops::attention_counters_bytes(d, capacity_), "attention counters", u32);
  L.counters.fill(0);
  // A multiple of 64 bytes: the tensor-core head stores whole columns of 16 rows at a time.
  L.logits_stride = round_up(4ull * c.vocab_size, std::max<uint64_t>(L.align, 64));
  L.logits = make(L.logits_stride * head_rows, "logits", f32);
  L.arg_values = make(4ull * p.argmax_plan.groups * outs, "argmax partial values", f32);
  L.arg_indices = make(4ull * p.argmax_plan.groups * outs, "argmax partial indices", u32);
  L.pick_counters = make(4 * outs, "argmax pick counters", u32);
  L.pick_counters.fill(0);  // each row's last candidates workgroup leaves its counter zero
  L.full_values = make(4ull * p.argmax_plan.groups * outs, "full head's argmax partial values", f32);
  L.full_indices = make(4ull * p.argmax_plan.groups * outs, "full head's argmax partial indices", u32);
  if (pruned_head_) {
    L.xq = make(outs * c.dim, "output norm in int8", std::nullopt);
    L.head_stats = make(16 * outs, "output norm stats", f32);
    L.upper = make(L.logits_stride * outs, "upper bounds", f32);
    const uint32_t lower_count = std::max(ops::lm_head_bounds_workgroups(t, vocab),
                                          bounds_on_tensor_cores_ ? ops::lm_head_bounds_coopmat_workgroups(t, vocab) : 0u);
    L.lower = make(4ull * lower_count * outs, "lower bounds", f32);
  }
  if (listed_head_) {
    L.list_values = make(L.logits_stride * outs, "candidate lists' logits", f32);
    L.list_indices = make(L.logits_stride * outs, "candidate lists' ids", u32);
    L.list_count = make(4 * outs, "candidate lists' lengths", u32);
    L.list_count.fill(0);  // each draw leaves its list empty
    L.list_top_values = make(4ull * p.top_k * outs, "candidate lists' best values", f32);
    L.list_top_indices = make(4ull * p.top_k * outs, "candidate lists' best ids", u32);
    L.list_length = make(4 * outs, "candidate lists' last lengths", u32);
  }
  // Every token source (TokenSource order, each where the tails write it), for the next step's
  // embedding and, through the staging half of the step's parity, the host.
  {
    const uint64_t source_bytes = round_up(4 * outs, L.align);
    L.token_sources = make(kTokenSources * source_bytes, "output tokens", u32);
    L.token_sources.fill(0);
    rt::BufferSlice* sources[kTokenSources] = {&L.chosen, &L.list_token, &L.full_best, &L.sampled, &L.list_best};
    for (uint32_t i = 0; i < kTokenSources; ++i) *sources[i] = L.token_sources.slice(i * source_bytes, 4 * outs);
    L.source_words = uint32_t(source_bytes / 4);
    L.out_staging = make(2 * L.token_sources.size(), "output tokens' staging", u32, true);
    L.logprob_staging = make(2 * 4ull * ops::token_logprob_words(top_logprobs_) * outs, "log-probabilities' staging", u32, true);
    const uint64_t groups = ops::top_k_plan(t, vocab, top_logprobs_).groups;
    L.logprob_part_values = make(4ull * groups * top_logprobs_ * outs, "log-probabilities' top-k partial values", f32);
    L.logprob_part_indices = make(4ull * groups * top_logprobs_ * outs, "log-probabilities' top-k partial indices", u32);
    L.logprob_top_values = make(4ull * top_logprobs_ * outs, "log-probabilities' top-k values", f32);
    L.logprob_top_indices = make(4ull * top_logprobs_ * outs, "log-probabilities' top-k indices", u32);
  }
  if (p.top_k) {
    L.top_part_values = make(4ull * p.top_k_plan.groups * p.top_k * outs, "top-k partial values", f32);
    L.top_part_indices = make(4ull * p.top_k_plan.groups * p.top_k * outs, "top-k partial indices", u32);
    L.top_values = make(4ull * p.top_k * outs, "top-k values", f32, true);
    L.top_indices = make(4ull * p.top_k * outs, "top-k indices", u32, true);
    L.vocab_state = make(4ull * ops::kVocabStateWords * outs, "vocabulary draws' state", u32);
    L.vocab_mass = make(8ull * ops::kVocabBuckets * outs, "vocabulary draws' buckets", u32);
    L.vocab_mass.fill(0);  // each select leaves its buckets zero
    const uint64_t groups = ops::vocab_sampling_groups(t, vocab);
    L.vocab_part_values = make(4 * groups * outs, "vocabulary draws' partial scores", f32);
    L.vocab_part_indices = make(4 * groups * outs, "vocabulary draws' partial ids", u32);
  }
  // The steps' inputs in from their staging half with the embedding, their tokens out to theirs
  // (the count of steps run then one more): two small compiles, sized by the buffers above.
  const auto& split = model.pipelines().split;
  embedding_.emplace(ops::make_pipeline(ctx, ops::plan_embedding_lookup_fed(t, {c.dim, split.rows_per_part, split.parts}, vocab, kFedSources,
                                                                            ops::StagedInputs{uint32_t(L.inputs.size() / 4),
                                                                                              uint32_t(L.tokens.offset / 4)})));
  stage_outputs_.emplace(
      ops::make_pipeline(ctx, ops::plan_parity_copy(t, uint32_t(L.token_sources.size() / 4), ops::ParityCopy::ToHalf, true)));
  device_bytes_ = L.bytes;
}

BitNetBatchDecoder::~BitNetBatchDecoder() {
  for (auto& s : steps_)
    if (s.graph && s.graph->last_ticket()) s.graph->wait(s.graph->last_ticket());
  for (auto& t : tails_)
    for (auto* graph : {t.graph.get(), t.with_layers.get()})
      if (graph && graph->last_ticket()) graph->wait(graph->last_ticket());
}

uint32_t BitNetBatchDecoder::bucket_for(uint32_t entries) const {
  if (entries == 0 || entries > capacity_)
    throw std::out_of_range(fmt::format("a step of {} entries; this decoder's steps take 1 to {}", entries, capacity_));
  return entries <= exact_buckets_ ? entries : std::min(std::bit_ceil(entries), capacity_);
}

void BitNetBatchDecoder::copy_rows(bool into_slot, uint32_t slot, uint32_t first, uint32_t count) {
  if (count == 0) return;
  const auto& c = model_.config();
  const uint64_t row_bytes = uint64_t{model_.pipelines().dims.kv_words()} * 4;
  const Lanes& L = *lanes_;
  const auto& a = *model_.act_;
  rt::Graph g(ctx_, {false, "slot cache copy"});
  for (uint32_t l = 0; l < c.n_layers; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      const rt::Buffer& model_cache = kv ? a.v_cache[l] : a.k_cache[l];
      const rt::Buffer& slot_cache = kv ? L.v_cache[l] : L.k_cache[l];
      const auto in_model = model_cache.slice(first * row_bytes, count * row_bytes);
      const auto in_slot = slot_cache.slice(slot * L.cache_slot_bytes + first * row_bytes, count * row_bytes);
      into_slot ? g.copy(in_model, in_slot) : g.copy(in_slot, in_model);
    }
  g.submit_and_wait();
}

models::StepOutput BitNetBatchDecoder::prefill(uint32_t slot, std::span<const int32_t> tokens, uint32_t pos,
                                               const models::SamplerOptions& sampling, int32_t logprobs,
                                               const models::PromptScoring& scoring) {
  if (slot >= slots_) throw std::out_of_range(fmt::format("slot {} of a {}-slot decoder", slot, slots_));
  const Sharer one{slot, sampling, logprobs};
  return run_prefill(std::span(&one, 1), tokens, pos, scoring)[0];
}

std::vector<models::StepOutput> BitNetBatchDecoder::prefill_shared(std::span<const Sharer> sharers,
                                                                   std::span<const int32_t> tokens, uint32_t pos) {
  check_sharers(sharers, slots_);
  return run_prefill(sharers, tokens, pos, {});
}

std::vector<models::StepOutput> BitNetBatchDecoder::run_prefill(std::span<const Sharer> sharers, std::span<const int32_t> tokens,
                                                                uint32_t pos, const models::PromptScoring& scoring) {
  if (tokens.empty()) throw std::invalid_argument("prefill: no tokens");
  if (uint64_t{pos} + tokens.size() > context_length())
    throw std::out_of_range(fmt::format("prefill of {} tokens at position {} goes past the context length {}", tokens.size(),
                                        pos, context_length()));
  for (const Sharer& s : sharers) {
    check_batch_sampling(s.sampling, top_k());
    check_logprobs(s.logprobs, top_logprobs_);
  }
  wait_in_flight();  // a step in flight may still write these slots' rows
  // The model's cache must hold positions 0..pos-1 (every sharer's alike) for the chunk's attention.
  const uint32_t first = sharers[0].slot;
  if (model_slot_ != first || model_rows_ < pos) copy_rows(false, first, 0, pos);
  model_slot_ = UINT32_MAX;  // until the prefill has run
  const models::StepOutput ran = scoring.on_scored ? model_.prefill_scored(tokens, pos, scoring) : model_.prefill(tokens, pos);
  std::vector<models::StepOutput> outs;
  for (const Sharer& s : sharers) {
    // The model's prefill returns its candidates: the host twin of the device sampler picks.
    models::StepOutput& out = outs.emplace_back(ran);
    out.token = models::choose_after_step(model_, out, s.sampling, pos + uint32_t(tokens.size()));
    models::logprobs_after_step(model_, out, s.logprobs);
    copy_rows(true, s.slot, pos, uint32_t(tokens.size()));
  }
  model_slot_ = first;
  model_rows_ = pos + uint32_t(tokens.size());
  return outs;
}

std::vector<models::StepOutput> BitNetBatchDecoder::decode(std::span<const Entry> batch) { return collect(submit(batch)); }

void BitNetBatchDecoder::stage_away(std::span<uint32_t> half) const {
  const Lanes& L = *lanes_;
  const ops::SequenceState away{0, context_length(), 0, 0};
  for (uint32_t lane = 0; lane < capacity_; ++lane) {
    half[L.tokens.offset / 4 + lane] = 0;
    std::memcpy(&half[L.sequences.offset / 4 + size_t{ops::kSequenceWords} * lane], &away, sizeof away);
  }
}

// Where an output's token is left on the device for the next step's embedding (its fed source),
// and which buffer collect() reads it from: the lists' draw where the tail ran them (but for
// draws over the vocabulary), else the pruned head's argmax for greedy outputs, else the full head's.
BitNetBatchDecoder::TokenSource BitNetBatchDecoder::token_source(const TailKind& kind, const models::SamplerOptions& s) const {
  if (kind.listed && !models::draws_over_vocabulary(s)) return TokenSource::Listed;
  if (models::is_greedy(s)) return kind.pruned ? TokenSource::Pruned : TokenSource::FullArgmax;
  return TokenSource::FullSampled;
}

uint64_t BitNetBatchDecoder::submit(std::span<const Entry> batch) {
  if (batch.empty() || batch.size() > capacity_)
    throw std::invalid_argument(fmt::format("a decode step takes 1 to {} entries, got {}", capacity_, batch.size()));
  if (in_flight_.size() >= kMaxSubmitted)
    throw std::logic_error(fmt::format("a step submitted while {} are not collected", in_flight_.size()));
  // A slot's entries: one, or a prompt run at consecutive positions. `last[s]`: its last entry.
  std::vector<int64_t> last(slots_, -1);
  for (size_t i = 0; i < batch.size(); ++i) {
    const Entry& e = batch[i];
    if (e.slot >= slots_) throw std::out_of_range(fmt::format("slot {} of a {}-slot decoder", e.slot, slots_));
    if (e.previous >= 0) {
      if (size_t(e.previous) >= previous_fed_.size() || previous_fed_[size_t(e.previous)] == kNoOutput)
        throw std::invalid_argument(fmt::format("entry {} takes the output of entry {} of the step before, which {}", i,
                                                e.previous,
                                                size_t(e.previous) >= previous_fed_.size()
                                                    ? fmt::format("has {} entries", previous_fed_.size())
                                                    : std::string("has no output")));
    } else if (e.token < 0 || uint32_t(e.token) >= vocab_size()) {
      throw std::out_of_range(fmt::format("token id {} outside the vocabulary of {}", e.token, vocab_size()));
    }
    if (e.pos >= context_length())
      throw std::out_of_range(fmt::format("position {} is past the context length {}", e.pos, context_length()));
    if (last[e.slot] >= 0) {
      const Entry& before = batch[size_t(last[e.slot])];
      if (options_.prompt_lanes == 0)
        throw std::invalid_argument(fmt::format("slot {} twice in one decode step", e.slot));
      if (e.pos != before.pos + 1)
        throw std::invalid_argument(fmt::format("slot {} at position {} after position {} in one step: a slot's entries "
                                                "are a run of consecutive positions",
                                                e.slot, e.pos, before.pos));
    }
    last[e.slot] = int64_t(i);
    check_batch_sampling(e.sampling, top_k());
    check_logprobs(e.logprobs, top_logprobs_);
  }
  InFlight f;
  f.batch.assign(batch.begin(), batch.end());
  // Lanes: the entries with an output (each slot's last) first, in entry order, then the rest.
  f.lane_of.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    if (last[batch[i].slot] == int64_t(i)) f.lane_of[i] = f.outputs++;
  for (uint32_t i = 0, rest = f.outputs; i < batch.size(); ++i)
    if (last[batch[i].slot] != int64_t(i)) f.lane_of[i] = rest++;
  Step& step = step_for(bucket_for(uint32_t(batch.size())));
  // The tail the outputs need (tail_kind): greedy ones, ones drawn from their top-k, ones drawn
  // over every logit.
  Draws draws;
  for (size_t i = 0; i < batch.size(); ++i)
    if (f.has_output(i)) draws.add(batch[i].sampling, batch[i].logprobs);
  Tail& tail = tail_for(std::min(std::bit_ceil(f.outputs), slots_),
                        tail_kind(draws.greedy, draws.sampled, draws.vocabulary, draws.logprobs, draws.logprob_top));
  f.kind = tail.kind;
  Lanes& L = *lanes_;
  // This step's inputs, into the staging half of its parity (the step two before, which used it,
  // has been collected): its embedding copies them where the step reads them. Lanes without an
  // entry run at a position past the context: they write no cache row.
  f.parity = uint32_t(steps_run_ % 2);
  const std::span<uint32_t> staging = L.in_staging.host_words().subspan(f.parity * L.inputs.size() / 4, L.inputs.size() / 4);
  const std::span<uint32_t> tokens = staging.subspan(L.tokens.offset / 4, capacity_);
  const std::span<uint32_t> states = staging.subspan(L.sequences.offset / 4, size_t{ops::kSequenceWords} * capacity_);
  stage_away(staging);
  for (size_t i = 0; i < batch.size(); ++i) {
    const Entry& e = batch[i];
    const uint32_t lane = f.lane_of[i];
    const bool fed = e.previous >= 0;
    tokens[lane] = fed ? previous_fed_[size_t(e.previous)] : uint32_t(e.token);
    const ops::SequenceState state{fed ? 0u : uint32_t(e.token), e.pos, e.slot * context_length(), 0};
    std::memcpy(&states[size_t{ops::kSequenceWords} * lane], &state, sizeof state);
    // The model's copy of this slot (prefill) no longer holds the rows the step rewrites.
    if (e.slot == model_slot_) model_rows_ = std::min(model_rows_, e.pos);
  }
  if (sample_) {
    const std::span<uint32_t> params = staging.subspan(L.sample_params.offset / 4, L.sample_params.bytes / 4);
    for (size_t i = 0; i < batch.size(); ++i)
      if (f.has_output(i)) {
        const auto words = sample_params(batch[i].sampling, batch[i].pos + 1).pack();
        std::copy(words.begin(), words.end(), params.begin() + size_t{f.lane_of[i]} * ops::kSampleParamsWords);
      }
  }
  // Where each output that asks for log-probabilities finds its token (token_sources' word).
  if (f.kind.logprobs) {
    const std::span<uint32_t> select = staging.subspan(L.logprob_select.offset / 4, slots_);
    std::fill(select.begin(), select.end(), ops::kNoLogprobs);
    for (size_t i = 0; i < batch.size(); ++i)
      if (f.has_output(i) && batch[i].logprobs >= 0)
        select[f.lane_of[i]] = uint32_t(token_source(f.kind, batch[i].sampling)) * L.source_words + f.lane_of[i];
  }
  // Back to back: each replay ends with a barrier to what follows, so the tail reads the layers' x
  // (and the next step what this one's tail wrote).
  if (step.lanes == 1) {  // one submission: the layers and the tail in one command buffer
    if (!tail.with_layers) tail.with_layers = record_one_lane(step, tail);
    f.step = f.tail = tail.with_layers.get();
    f.step_ticket = f.tail_ticket = tail.with_layers->submit();
  } else {
    f.step = step.graph.get();
    f.step_ticket = step.graph->submit();
    f.tail = tail.graph.get();
    f.tail_ticket = tail.graph->submit();
  }
  ++steps_run_;
  f.ticket = ++tickets_;
  // What the next step's `previous` entries name: where each output's token is left.
  previous_fed_.assign(batch.size(), kNoOutput);
  for (size_t i = 0; i < batch.size(); ++i)
    if (f.has_output(i))
      previous_fed_[i] = ops::fed_token_word(uint32_t(token_source(f.kind, batch[i].sampling)), f.lane_of[i]);
  in_flight_.push_back(std::move(f));
  // Candidates and logits are read where the tail left them, before the next step overwrites them.
  if (options_.return_candidates) in_flight_.back().candidates = read_candidates(in_flight_.back());
  return tickets_;
}

std::array<const rt::Graph*, 2> BitNetBatchDecoder::recorded(uint32_t bucket, const models::SamplerOptions& sampling) const {
  std::array<const rt::Graph*, 2> r{nullptr, nullptr};  // layers, tail
  for (const auto& s : steps_)
    if (s.lanes == bucket) r[0] = s.graph.get();
  Draws draws;
  draws.add(sampling);
  const TailKind kind = tail_kind(draws.greedy, draws.sampled, draws.vocabulary);
  for (const auto& t : tails_)
    if (t.rows == std::min(std::bit_ceil(bucket), slots_) && t.kind == kind) {  // the tail a step of `bucket` outputs takes
      if (bucket == 1) return {t.with_layers.get(), nullptr};  // what a one-lane step runs (null: not made yet)
      r[1] = t.graph.get();
    }
  return r;
}

rt::GraphStats BitNetBatchDecoder::step_stats(uint32_t bucket, const models::SamplerOptions& sampling) const {
  rt::GraphStats sum;
  for (const rt::Graph* g : recorded(bucket, sampling))
    if (g) {
      const rt::GraphStats s = g->stats();
      sum.dispatches += s.dispatches, sum.transfers += s.transfers, sum.barriers += s.barriers, sum.steps += s.steps;
    }
  return sum;
}

std::vector<double> BitNetBatchDecoder::step_timestamps_ns(uint32_t bucket, const models::SamplerOptions& sampling) const {
  std::vector<double> ns;
  for (const rt::Graph* g : recorded(bucket, sampling))
    if (g) {
      const auto t = g->timestamps_ns();
      ns.insert(ns.end(), t.begin(), t.end());
    }
  return ns;
}

std::vector<std::string> BitNetBatchDecoder::step_operation_names(uint32_t bucket, const models::SamplerOptions& sampling) const {
  std::vector<std::string> names;
  for (const rt::Graph* g : recorded(bucket, sampling))
    if (g) {
      const auto n = g->operation_names();
      names.insert(names.end(), n.begin(), n.end());
    }
  return names;
}

void BitNetBatchDecoder::replay_greedy_steps(uint32_t bucket, uint32_t n) {
  const auto wanted = recorded(bucket);
  std::vector<rt::Graph*> graphs;  // the same graphs, to replay (the one-lane bucket's: one)
  for (auto& s : steps_)
    if (s.graph.get() == wanted[0]) graphs.push_back(s.graph.get());
  for (auto& t : tails_) {
    if (t.graph.get() == wanted[1]) graphs.push_back(t.graph.get());
    if (t.with_layers && t.with_layers.get() == wanted[0]) graphs.push_back(t.with_layers.get());
  }
  if (graphs.size() != (wanted[1] ? 2u : 1u) || !wanted[0])
    throw std::logic_error(fmt::format("no greedy step recorded for bucket {}", bucket));
  if (!in_flight_.empty()) throw std::logic_error("replay_greedy_steps with steps in flight");
  // The last step's inputs in both staging halves: the replays alternate between them.
  Lanes& L = *lanes_;
  const std::span<uint32_t> staging = L.in_staging.host_words();
  const size_t half = L.inputs.size() / 4, last = (steps_run_ + 1) % 2;
  std::copy_n(staging.begin() + last * half, half, staging.begin() + (1 - last) * half);
  for (uint32_t i = 0; i < n; ++i) {
    for (rt::Graph* g : graphs) g->submit();
    ++steps_run_;  // each tail counts a step on the device
  }
  for (rt::Graph* g : graphs) g->wait(g->last_ticket());
}

double BitNetBatchDecoder::step_gpu_span_ns(uint32_t bucket, const models::SamplerOptions& sampling) const {
  double span = 0;
  for (const rt::Graph* g : recorded(bucket, sampling))
    if (g) span += g->span_ns();
  return span;
}

}  // namespace bdsl::bitnet
