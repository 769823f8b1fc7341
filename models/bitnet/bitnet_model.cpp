#include "models/bitnet/bitnet_model.h"

#include "models/bitnet/activations.h"
#include "models/bitnet/sample_settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <future>
#include <stdexcept>
#include <utility>

#include "models/bitnet/graph_traits.h"
#include "models/numerics/half_float.h"
#include "ops/attention.h"
#include "ops/common.h"
#include "ops/ternary.h"

namespace bdsl::bitnet {


BitNetModel::BitNetModel(rt::Context& ctx, const models::GgufFile& file, const models::BitNetConfig& config,
                         const ModelOptions& options, const UploadProgress& progress)
    : ctx_(ctx), config_(config), options_(options) {
  if (options.top_k > ops::kMaxTopK)
    throw std::invalid_argument(fmt::format("top-k must be at most {}, got {}", ops::kMaxTopK, options.top_k));
  // The pipelines compile (on threads of their own) while the weights upload.
  auto pipelines = std::async(std::launch::async, [this] { return make_pipelines(); });
  const bool greedy_head = wants_greedy_head();
  const ops::LmHeadSplit split = ops::lm_head_split(ops::OpTarget::from(ctx.info()), config.vocab_size, config.dim);
  weights_ = upload_weights(ctx, file, config, split.rows_per_part,
                            Activations::bytes(config) + (greedy_head ? greedy_head_bytes(config) : 0), progress,
                            options.weights_in_place);
  // The LM head's shadow: quantized by the host while the pipelines still compile, or derived by
  // the device from its F16 table once they are built.
  const bool host_shadow = greedy_head && !BitNetPipelines::derives_shadow(ctx.info());
  if (host_shadow) greedy_head_ = upload_greedy_head(ctx, file, config, split.rows_per_part);
  pipelines_ = pipelines.get();
  if (greedy_head && !host_shadow) greedy_head_ = derive_greedy_head(ctx, *pipelines_->lm_head_shadow, weights_.lm_head());
  act_ = std::make_unique<Activations>(ctx, config, *pipelines_);
  record();
}

BitNetModel::~BitNetModel() = default;

DeviceMemory BitNetModel::device_memory() const {
  DeviceMemory m;
  m.weights = weights_.bytes;
  m.weights_in_place = weights_.in_place_bytes;
  if (greedy_head_) {
    for (const auto& part : greedy_head_->parts) m.head_shadow += part.size();
    m.head_shadow += greedy_head_->scale.size() + greedy_head_->bound.size();
  }
  for (const auto* caches : {&act_->k_cache, &act_->v_cache})
    for (const auto& c : *caches) m.kv_cache += c.size();
  m.activations = act_->bytes_held() - m.kv_cache;
  return m;
}

bool greedy_head_pays(const rt::DeviceInfo& device) { return device.type != rt::DeviceType::Cpu; }

bool BitNetModel::wants_greedy_head() const {
  return options_.greedy_head && !options_.dump && ops::lm_head_pruned_supported(config_.dim);
}

std::unique_ptr<BitNetPipelines> BitNetModel::make_pipelines() const {
  return std::make_unique<BitNetPipelines>(ctx_, config_, std::min(options_.top_k, config_.vocab_size),
                                           codegen::default_shader_cache(), options_.decode_tuning, wants_greedy_head(),
                                           options_.exact_norm_scale);
}

// With options.dump, copies `floats` of `src` into the dump buffer right after they were produced
// (later layers overwrite the same activation buffers).
void BitNetModel::dump(const rt::Buffer& src, uint64_t floats, std::string name) {
  if (!options_.dump) return;
  graph_->copy(src.slice(0, floats * 4), act_->dumps.slice(dump_floats_ * 4, floats * 4));
  dump_slots_.push_back({std::move(name), dump_floats_, floats});
  dump_floats_ += floats;
}

std::vector<rt::Arg> BitNetModel::layer_args(uint32_t l, LayerOp op) const {
  const auto& w = weights_.layers[l];
  const auto& a = *act_;
  switch (op) {
    case LayerOp::Qkv:
      return {{"w_q", w.attn_q}, {"w_k", w.attn_k}, {"w_v", w.attn_v}, {"x", a.x}, {"norm_weight", w.attn_norm},
              {"step", a.step}, {"rope_table", a.rope_table}, {"y_q", a.q}, {"k_cache", a.k_cache[l]}, {"v_cache", a.v_cache[l]}};
    case LayerOp::Attention:
      return {{"step", a.step}, {"q", a.q}, {"k_cache", a.k_cache[l]}, {"v_cache", a.v_cache[l]},
              {"partials", a.partials}, {"counters", a.counters}, {"out", a.attn}};
    case LayerOp::AttnOutput: {
      std::vector<rt::Arg> args = {{"w", w.attn_output}, {"x", a.attn}, {"y", a.x}};
      if (config_.sub_norms) args.push_back({"norm_weight", w.attn_sub_norm});
      if (pipelines_->attention_tuning.defer_combine)
        args.insert(args.end(), {{"attention_step", a.step}, {"attention_partials", a.partials}, {"attention_used", a.attn_used}});
      return args;
    }
    case LayerOp::GateUp:
      return {{"w_gate", w.ffn_gate}, {"w_up", w.ffn_up}, {"x", a.x}, {"norm_weight", w.ffn_norm}, {"y", a.ffn}};
    case LayerOp::FfnDown:
      if (!config_.sub_norms) return {{"w", w.ffn_down}, {"x", a.ffn}, {"y", a.x}};
      return {{"w", w.ffn_down}, {"x", a.ffn}, {"norm_weight", w.ffn_sub_norm}, {"y", a.x}};
  }
  throw std::logic_error("layer op");
}

// Layer l's op as its own dispatch, then (with dump) a copy of what it produced.
void BitNetModel::record_op(uint32_t l, LayerOp op) {
  rt::Graph& g = *graph_;
  const auto& p = *pipelines_;
  auto& a = *act_;
  const float eps = config_.rms_norm_eps;
  const auto& d = p.dims;
  const auto b = layer_args(l, op);
  const rt::PushConstants sub_norm_push = config_.sub_norms ? rt::push(eps) : rt::PushConstants{};  // eps: the sub-norms'
  switch (op) {
    case LayerOp::Qkv:
      p.qkv.dispatch(g, b, rt::push(eps));
      return dump(a.q, d.q_width(), fmt::format("Qcur-{}", l));
    case LayerOp::Attention: {
      p.attention.dispatch(g, b);
      // With the combine deferred, attention's output exists only once attn_output has read it.
      if (!p.attention_tuning.defer_combine) dump(a.attn, d.q_width(), fmt::format("kqv_out-{}", l));
      return;
    }
    case LayerOp::AttnOutput:
      p.attn_output.dispatch(g, b, sub_norm_push);
      if (p.attention_tuning.defer_combine) dump(a.attn_used, d.q_width(), fmt::format("kqv_out-{}", l));
      return dump(a.x, config_.dim, fmt::format("ffn_inp-{}", l));
    case LayerOp::GateUp:
      p.gate_up.dispatch(g, b, rt::push(eps));
      return dump(a.ffn, config_.ffn_dim, fmt::format("ffn_out-{}", l));
    case LayerOp::FfnDown:
      p.ffn_down.dispatch(g, b, sub_norm_push);
      return dump(a.x, config_.dim, fmt::format("l_out-{}", l));
  }
}

void BitNetModel::record_layer(uint32_t l) {
  for (LayerOp op : {LayerOp::Qkv, LayerOp::Attention, LayerOp::AttnOutput, LayerOp::GateUp, LayerOp::FfnDown}) record_op(l, op);
}

void BitNetModel::record() {
  greedy_graph_.reset();
  sampled_graph_.reset();
  vocabulary_graph_.reset();
  vocabulary_group_.reset();
  penalized_graph_.reset();
  penalized_vocabulary_graph_.reset();
  embed_graph_.reset();
  greedy_group_.reset();
  sampled_group_.reset();
  if (pipelines_->lm_head_bounds && greedy_head_) {
    record_token(Tail::PrunedGreedy);
    greedy_graph_ = std::move(graph_);
    if (pipelines_->lm_head_candidate_list) {
      record_token(Tail::PrunedSampled);
      sampled_graph_ = std::move(graph_);
    }
  }
  if (greedy_graph_) record_embed_graph();
  record_token(Tail::Full);
}

void BitNetModel::record_embed_graph() {
  embed_graph_ = std::make_unique<rt::Graph>(ctx_, rt::GraphOptions{false, "bitnet embedding"});
  record_embedding(*embed_graph_);
  embed_graph_->finish();
}

void BitNetModel::prepare_vocabulary_draw() {
  // With dumps, every intermediate comes from graph_ alone and decode_sampled draws on the host.
  if (vocabulary_graph_ || options_.dump || !pipelines_->top_k) return;
  wait_idle();
  pipelines_->build_vocabulary(ctx_, config_);
  vocabulary_graph_ = record_aside(Tail::VocabularySampled, 1);
  if (!embed_graph_) record_embed_graph();
}

std::unique_ptr<rt::Graph> BitNetModel::record_aside(Tail tail, uint32_t copies) {
  auto full = std::move(graph_);  // record_token records into graph_
  try {
    record_token(tail, nullptr, copies);
  } catch (...) {
    graph_ = std::move(full);
    throw;
  }
  return std::exchange(graph_, std::move(full));
}

rt::Graph* BitNetModel::group_of(Tail tail, std::unique_ptr<rt::Graph>& group, uint32_t steps) {
  if (!group && !options_.timestamps && !options_.dump && options_.tokens_per_replay > 1 && steps >= options_.tokens_per_replay)
    group = record_aside(tail, options_.tokens_per_replay);
  return group.get();
}

void BitNetModel::prepare_penalized(bool vocabulary) {
  auto& graph = vocabulary ? penalized_vocabulary_graph_ : penalized_graph_;
  if (graph) return;
  wait_idle();
  pipelines_->build_repeat_penalty(ctx_, config_);
  if (vocabulary) pipelines_->build_vocabulary(ctx_, config_);
  auto full = std::move(graph_);  // record_token records into graph_
  record_token(vocabulary ? Tail::VocabularySampled : Tail::Full,
               vocabulary ? &penalized_vocabulary_parameters_ : &penalized_parameters_);
  graph = std::move(graph_);
  graph_ = std::move(full);
  if (vocabulary && !embed_graph_) record_embed_graph();
}

void BitNetModel::write_history(std::span<const int32_t> tokens, uint32_t pos) {
  wait_idle();  // a penalized replay writes it too
  const std::span<uint32_t> words = act_->history.host_words();
  for (size_t i = 0; i < tokens.size(); ++i) words[pos + i] = uint32_t(tokens[i]);
}

void BitNetModel::record_embedding(rt::Graph& g) {
  const auto& p = *pipelines_;
  std::vector<rt::Arg> embedding = {{"step", act_->step}, {"x", act_->x}};
  append_parts(embedding, "table", weights_.token_embd, "_");
  p.embedding.dispatch(g, embedding);
}

void BitNetModel::record_token(Tail tail, std::optional<PenaltyParameters>* penalty, uint32_t copies) {
  const char* name = tail == Tail::PrunedGreedy        ? "bitnet greedy token"
                     : tail == Tail::PrunedSampled     ? "bitnet sampled token"
                     : tail == Tail::VocabularySampled ? "bitnet token sampled over the vocabulary"
                                                       : "bitnet token";
  graph_ = std::make_unique<rt::Graph>(ctx_, rt::GraphOptions{options_.timestamps, std::string(name) + (penalty ? " with repeat penalty" : "") +
                                                                                    (copies > 1 ? fmt::format(" x{}", copies) : "")});
  rt::Graph& g = *graph_;
  const auto& p = *pipelines_;
  auto& a = *act_;
  if (options_.dump && !a.dumps.size()) {
    const auto& d = p.dims;
    const uint64_t per_layer = 2ull * d.q_width() + 2ull * config_.dim + config_.ffn_dim;
    const uint64_t floats = 2ull * config_.dim + per_layer * config_.n_layers + config_.vocab_size;
    a.dumps = rt::Buffer(ctx_, floats * 4, {true, "dumps"});
  }
  // The pruned recordings' embedding comes from the replay before it (record_tail). Each copy
  // reads the step state its copy before advanced.
  for (uint32_t copy = 0; copy < copies; ++copy) {
    if (tail == Tail::Full) record_embedding(g);
    dump(a.x, config_.dim, "inp_embd");
    for (uint32_t l = 0; l < config_.n_layers; ++l) record_layer(l);
    record_tail(g, tail, penalty);
  }
  g.finish();
}

void BitNetModel::record_tail(rt::Graph& g, Tail tail, std::optional<PenaltyParameters>* penalty) {
  const auto& p = *pipelines_;
  auto& a = *act_;
  const SplitMatrix& table = weights_.lm_head();
  if (tail == Tail::VocabularySampled) return record_vocabulary_draw(g, penalty);
  if (penalty && tail != Tail::Full) throw std::logic_error("the repeat penalty needs the full head's logits");
  if (tail != Tail::Full) {
    // The choice without every logit: the final norm with x quantized once, bounds from the int8
    // shadow, then the rows that may win (greedy) or be among the k best (sampled).
    p.lm_head_input->dispatch(g, {{"x", a.x}, {"weight", weights_.output_norm}, {"xn", a.xn}, {"xq", a.xq}, {"stats", a.head_stats}},
                              rt::push(config_.rms_norm_eps));
    std::vector<rt::Arg> bounds = {{"xq", a.xq}, {"stats", a.head_stats}, {"scale", greedy_head_->scale},
                                   {"bound", greedy_head_->bound}, {"upper", a.upper}, {"lower", a.lower}};
    for (size_t i = 0; i < greedy_head_->parts.size(); ++i) bounds.push_back({"table" + std::to_string(i), greedy_head_->parts[i]});
    p.lm_head_bounds->dispatch(g, bounds);
    if (tail == Tail::PrunedSampled) {
      std::vector<rt::Arg> list = {{"x", a.xn}, {"upper", a.upper}, {"lower", a.lower}, {"params", a.sample_params},
                                   {"list_values", a.list_values}, {"list_indices", a.list_indices}, {"list_count", a.list_count}};
      append_parts(list, "table", table);
      p.lm_head_candidate_list->dispatch(g, list);
      // The draw from the list's k best moves the step state on and writes the next embedding.
      std::vector<rt::Arg> draw = {{"list_values", a.list_values}, {"list_indices", a.list_indices}, {"list_count", a.list_count},
                                   {"params", a.sample_params}, {"top_values", a.top_values}, {"top_indices", a.top_indices},
                                   {"token", a.sampled}, {"list_length", a.list_length}, {"step", a.step},
                                   {"generated", a.generated}, {"x_next", a.x}};
      append_parts(draw, "embed_table", weights_.token_embd);
      p.sample_list->dispatch(g, draw);
      return;
    }
    // Its last workgroup also runs argmax_final, moves the step state on and writes the chosen
    // token's embedding into x for the next replay (decode_greedy).
    std::vector<rt::Arg> candidates = {{"x", a.xn}, {"upper", a.upper}, {"lower", a.lower}, {"part_values", a.arg_values},
                                       {"part_indices", a.arg_indices}, {"counter", a.head_counter}, {"token", a.token},
                                       {"step", a.step}, {"generated", a.generated}, {"x_next", a.x}};
    append_parts(candidates, "table", table);
    append_parts(candidates, "embed_table", weights_.token_embd);
    p.lm_head_candidates->dispatch(g, candidates);
    return;
  }
  record_logits(g, penalty);
  // Greedy and sampling candidates read the same logits: no barrier between the two chains.
  if (p.top_k)
    p.top_k_partial->dispatch(g, {{"values", a.logits}, {"part_values", a.top_part_values}, {"part_indices", a.top_part_indices}});
  const std::vector<rt::Arg> final_args = {{"part_values", a.arg_values}, {"part_indices", a.arg_indices}, {"token", a.token}};
  const bool decode = &g == graph_.get();
  if (decode && !p.top_k) {  // the step state moves on to this choice (decode_greedy)
    std::vector<rt::Arg> advance = final_args;
    advance.insert(advance.end(), {{"step", a.step}, {"generated", a.generated}});
    p.argmax_final_advance.dispatch(g, advance);
  } else {
    p.argmax_final.dispatch(g, final_args);
  }
  if (p.top_k)
    p.top_k_merge->dispatch(g, {{"part_values", a.top_part_values}, {"part_indices", a.top_part_indices},
                                {"top_values", a.top_values}, {"top_indices", a.top_indices}});
  if (decode && p.top_k)  // the step state moves on to the draw (decode_sampled; greedy settings: the argmax)
    p.sample_advance->dispatch(g, {{"top_values", a.top_values}, {"top_indices", a.top_indices}, {"params", a.sample_params},
                                   {"token", a.sampled}, {"step", a.step}, {"generated", a.generated}});
}

// Every logit, then the draw over the whole vocabulary (top_k 0): the argmax for the best logit,
// the radix passes of top-p, the draw, which moves the step state on and writes the next embedding.
void BitNetModel::record_logits(rt::Graph& g, std::optional<PenaltyParameters>* penalty) {
  const auto& p = *pipelines_;
  auto& a = *act_;
  p.output_norm.dispatch(g, {{"x", a.x}, {"weight", weights_.output_norm}, {"out", a.xn}}, rt::push(config_.rms_norm_eps));
  if (&g == graph_.get()) dump(a.xn, config_.dim, "result_norm");
  std::vector<rt::Arg> head = {{"x", a.xn}, {"logits", a.logits}};
  append_parts(head, "table", weights_.lm_head());
  p.lm_head.dispatch(g, head);
  if (&g == graph_.get()) dump(a.logits, config_.vocab_size, "result_output");
  if (penalty) {
    penalty->emplace(PenaltyParameters{g.parameter(1.0f), g.parameter(1.0f), g.parameter<uint32_t>(0)});
    const PenaltyParameters& q = **penalty;
    p.repeat_penalty->dispatch(g, {{"logits", a.logits}, {"step", a.step}, {"history", a.history}},
                               rt::push(q.penalty, q.inverse_penalty, q.last_n));
  }
  p.argmax_partial.dispatch(g, {{"values", a.logits}, {"part_values", a.arg_values}, {"part_indices", a.arg_indices}});
}

void BitNetModel::record_vocabulary_draw(rt::Graph& g, std::optional<PenaltyParameters>* penalty) {
  const auto& p = *pipelines_;
  auto& a = *act_;
  record_logits(g, penalty);
  p.argmax_final.dispatch(g, {{"part_values", a.arg_values}, {"part_indices", a.arg_indices}, {"token", a.token}});
  const uint32_t stride = config_.vocab_size;
  for (uint32_t pass = 0; pass < ops::kVocabPasses; ++pass) {
    p.vocab_mass_histogram[pass].dispatch(g, {{"logits", a.logits}, {"best", a.token}, {"params", a.sample_params},
                                              {"state", a.vocab_state}, {"mass", a.vocab_mass}},
                                          rt::push(stride));
    p.vocab_mass_select[pass].dispatch(g, {{"params", a.sample_params}, {"mass", a.vocab_mass}, {"state", a.vocab_state}});
  }
  p.vocab_draw_partial->dispatch(g, {{"logits", a.logits}, {"best", a.token}, {"params", a.sample_params}, {"state", a.vocab_state},
                                     {"part_values", a.vocab_part_values}, {"part_indices", a.vocab_part_indices}, {"step", a.step}},
                                 rt::push(stride));
  std::vector<rt::Arg> draw = {{"part_values", a.vocab_part_values}, {"part_indices", a.vocab_part_indices}, {"params", a.sample_params},
                               {"token", a.sampled}, {"step", a.step}, {"generated", a.generated}, {"x_next", a.x}};
  append_parts(draw, "embed_table", weights_.token_embd);
  p.vocab_draw_final->dispatch(g, draw);
}

void BitNetModel::check_tokens(std::span<const int32_t> tokens, uint32_t pos) const {
  for (int32_t token : tokens)
    if (token < 0 || uint32_t(token) >= config_.vocab_size)
      throw std::out_of_range(fmt::format("token id {} outside the vocabulary of {}", token, config_.vocab_size));
  if (pos + tokens.size() > config_.context_length)
    throw std::out_of_range(fmt::format("position {} is past the context length {}", pos + tokens.size() - 1,
                                        config_.context_length));
}

void BitNetModel::write_step_state(uint32_t token, uint32_t pos) {
  ops::StepState s;
  s.token = token;
  s.pos = pos;
  s.epoch = epoch_;
  act_->step.upload_bytes(std::as_bytes(std::span(&s, 1)));
}

StepOutput BitNetModel::step(int32_t token, uint32_t pos) {
  check_tokens(std::span(&token, 1), pos);
  write_history(std::span(&token, 1), pos);  // also waits: nothing earlier may still read the step state
  ++epoch_;
  write_step_state(uint32_t(token), pos);
  graph_->submit_and_wait();
  return read_step_output();
}

uint32_t BitNetModel::decode_greedy(int32_t token, uint32_t pos, uint32_t max_steps,
                                    const std::function<bool(int32_t)>& on_token) {
  if (max_steps == 0) return 0;
  check_tokens(std::span(&token, 1), pos);
  check_steps(pos, max_steps);
  if (options_.dump) return step_by_step(token, pos, max_steps, {}, on_token);  // the dumps need the host after every step
  wait_idle();
  if (!greedy_graph_ && pipelines_->top_k) write_sampling({});  // the decode graph's draw: the argmax
  rt::Graph* group = greedy_graph_ ? group_of(Tail::PrunedGreedy, greedy_group_, max_steps) : nullptr;
  return replay_feeding(greedy_graph_ ? *greedy_graph_ : *graph_, group, token, pos, max_steps, on_token);
}

uint32_t BitNetModel::decode_sampled(int32_t token, uint32_t pos, uint32_t max_steps, const models::SamplerOptions& sampling,
                                     const std::function<bool(int32_t)>& on_token) {
  if (models::penalizes(sampling)) return decode_penalized(token, pos, max_steps, sampling, on_token);
  if (sampling.temperature == 0.0f) return decode_greedy(token, pos, max_steps, on_token);
  models::check_sampling(sampling, pipelines_->top_k);
  if (max_steps == 0) return 0;
  check_tokens(std::span(&token, 1), pos);
  check_steps(pos, max_steps);
  if (options_.dump) return step_by_step(token, pos, max_steps, sampling, on_token);  // the host twin draws
  wait_idle();
  write_sampling(sampling);
  if (models::draws_over_vocabulary(sampling)) {
    prepare_vocabulary_draw();
    return replay_feeding(*vocabulary_graph_, group_of(Tail::VocabularySampled, vocabulary_group_, max_steps), token, pos,
                          max_steps, on_token);
  }
  rt::Graph* group = sampled_graph_ ? group_of(Tail::PrunedSampled, sampled_group_, max_steps) : nullptr;
  return replay_feeding(sampled_graph_ ? *sampled_graph_ : *graph_, group, token, pos, max_steps, on_token);
}

uint32_t BitNetModel::decode_penalized(int32_t token, uint32_t pos, uint32_t max_steps, const models::SamplerOptions& sampling,
                                       const std::function<bool(int32_t)>& on_token) {
  models::check_sampling(sampling, pipelines_->top_k);
  if (options_.dump) throw std::invalid_argument("the repeat penalty runs in the device's sampler: not with dumps");
  if (max_steps == 0) return 0;
  check_tokens(std::span(&token, 1), pos);
  check_steps(pos, max_steps);
  const bool vocabulary = models::draws_over_vocabulary(sampling);
  prepare_penalized(vocabulary);
  wait_idle();
  if (pipelines_->top_k) write_sampling(sampling);  // greedy settings: the draw takes the argmax
  PenaltyParameters& q = vocabulary ? *penalized_vocabulary_parameters_ : *penalized_parameters_;
  q.penalty.set(sampling.repeat_penalty);
  q.inverse_penalty.set(1.0f / sampling.repeat_penalty);  // as models::apply_repeat_penalty rounds it
  q.last_n.set(sampling.repeat_last_n);
  return replay_feeding(vocabulary ? *penalized_vocabulary_graph_ : *penalized_graph_, nullptr, token, pos, max_steps, on_token);
}

uint32_t BitNetModel::step_by_step(int32_t token, uint32_t pos, uint32_t max_steps, const models::SamplerOptions& sampling,
                                   const std::function<bool(int32_t)>& on_token) {
  for (uint32_t i = 0; i < max_steps; ++i) {
    StepOutput out = step(token, pos + i);
    token = models::choose_after_step(*this, out, sampling, pos + i + 1);
    if (!on_token(token)) return i + 1;
  }
  return max_steps;
}

void BitNetModel::check_steps(uint32_t pos, uint32_t max_steps) const {
  if (uint64_t{pos} + max_steps > config_.context_length)
    throw std::out_of_range(fmt::format("{} steps from position {} go past the context length {}", max_steps, pos,
                                        config_.context_length));
}

void BitNetModel::write_sampling(const models::SamplerOptions& sampling) {
  // The counter comes from the step state (the chosen token's position), not from here.
  const auto words = sample_params(sampling, 0).pack();
  act_->sample_params.upload(std::vector<uint32_t>(words.begin(), words.end()));
}

uint32_t BitNetModel::replay_feeding(rt::Graph& graph, rt::Graph* group, int32_t token, uint32_t pos, uint32_t max_steps,
                                     const std::function<bool(int32_t)>& on_token) {
  ++epoch_;
  write_step_state(uint32_t(token), pos);
  // x for the first replay of the greedy recording (which starts with layer 0): queued ahead of
  // it (each recording ends with a barrier that makes its writes visible to what the queue runs
  // next), no wait.
  if (&graph == greedy_graph_.get() || &graph == sampled_graph_.get() || &graph == vocabulary_graph_.get() ||
      &graph == penalized_vocabulary_graph_.get())
    embed_graph_->submit();
  // Every token leaves the step state at the next position with its choice as the token, so the
  // host only queues replays (Graph::kInFlight of each recording) and reads each token where it was
  // put. A replay of `group` takes tokens_per_replay tokens while at least that many are left (no
  // position past max_steps: each is inside the context); the last ones go one a replay.
  const uint32_t per_group = group ? options_.tokens_per_replay : 1;
  struct Replay {
    rt::Graph* g;
    uint64_t ticket;
    uint32_t tokens;
  };
  std::deque<Replay> pending;
  struct Drain {  // on the way out, however it goes: nothing may still be running
    std::array<rt::Graph*, 2> graphs;
    ~Drain() {
      for (rt::Graph* g : graphs)
        if (g) try {
            g->wait(g->last_ticket());
          } catch (...) {
          }
    }
  } drain{{&graph, group}};
  uint32_t submitted = 0, delivered = 0;
  const uint32_t first_epoch = epoch_;
  auto submit = [&] {
    rt::Graph& g = group && max_steps - submitted >= per_group ? *group : graph;
    const uint32_t tokens = &g == group ? per_group : 1;
    pending.push_back({&g, g.submit(), tokens});
    submitted += tokens;
    epoch_ = first_epoch + submitted - 1;  // the GPU counts the epoch on with the position: its last token's
  };
  while (pending.size() < rt::Graph::kInFlight && submitted < max_steps) submit();
  while (!pending.empty()) {
    const Replay r = pending.front();
    pending.pop_front();
    r.g->wait(r.ticket);
    const auto next = act_->generated.download<uint32_t>(uint64_t{pos + delivered} * 4, r.tokens);
    if (submitted < max_steps) submit();  // before the callbacks: the device is never left idle
    for (uint32_t t : next) {
      ++delivered;
      if (!on_token(int32_t(t))) return delivered;
    }
  }
  return delivered;
}

// Whether `graphs` (a recording and its group) ran: waits for them.
static bool ran(std::initializer_list<rt::Graph*> graphs) {
  bool any = false;
  for (rt::Graph* g : graphs)
    if (g && g->last_ticket()) g->wait(g->last_ticket()), any = true;
  return any;
}

uint32_t BitNetModel::greedy_candidate_rows() const {
  if (!ran({greedy_graph_.get(), greedy_group_.get()})) return 0;
  const auto upper = act_->upper.download<float>();
  const auto lower = act_->lower.download<float>();
  const float floor = *std::max_element(lower.begin(), lower.end());
  return uint32_t(std::count_if(upper.begin(), upper.end(), [&](float u) { return u >= floor; }));
}

uint32_t BitNetModel::sampled_candidate_rows() const {
  if (!ran({sampled_graph_.get(), sampled_group_.get()})) return 0;
  return act_->list_length.download<uint32_t>()[0];
}

void BitNetModel::wait_idle() {
  for (rt::Graph* g : {graph_.get(), greedy_graph_.get(), sampled_graph_.get(), greedy_group_.get(), sampled_group_.get(),
                       vocabulary_graph_.get(), vocabulary_group_.get(), penalized_graph_.get(), penalized_vocabulary_graph_.get(),
                       embed_graph_.get()})
    if (g) g->wait(g->last_ticket());
}

StepOutput BitNetModel::read_step_output() const {
  StepOutput out;
  out.argmax = int32_t(act_->token.download<uint32_t>()[0]);
  if (pipelines_->top_k) {
    const auto ids = act_->top_indices.download<uint32_t>();
    out.top_ids.assign(ids.begin(), ids.end());
    out.top_logits = act_->top_values.download<float>();
  }
  return out;
}

std::vector<float> BitNetModel::logits() const { return act_->logits.download<float>(); }

std::map<std::string, std::vector<float>> BitNetModel::dumps() const {
  std::map<std::string, std::vector<float>> out;
  if (!options_.dump) return out;
  const auto all = act_->dumps.download<float>();
  for (const auto& slot : dump_slots_) {
    std::vector<float> v(all.begin() + int64_t(slot.offset), all.begin() + int64_t(slot.offset + slot.floats));
    // q as the file's rows order it (graph_traits.h), as the reference computes it.
    out[slot.name] = reorders_qk_rows(config_) && slot.name.starts_with("Qcur-") ? to_file_order(config_, std::move(v)) : std::move(v);
  }
  return out;
}

}  // namespace bdsl::bitnet

namespace bdsl::bitnet {

std::vector<std::string> BitNetModel::dump_names() const {
  std::vector<std::string> names;
  for (const auto& slot : dump_slots_) names.push_back(slot.name);
  return names;
}

std::pair<std::vector<float>, std::vector<float>> BitNetModel::kv_cache(uint32_t l, uint32_t positions) const {
  const uint64_t words = uint64_t{positions} * pipelines_->dims.kv_words();
  auto widen = [&](const rt::Buffer& cache) {
    std::vector<float> out;
    for (uint32_t w : cache.download<uint32_t>(0, words)) {
      out.push_back(numerics::f16_to_f32(uint16_t(w & 0xffff)));
      out.push_back(numerics::f16_to_f32(uint16_t(w >> 16)));
    }
    return out;
  };
  auto k = widen(act_->k_cache.at(l));
  if (reorders_qk_rows(config_)) k = to_file_order(config_, std::move(k));  // the file's row order (graph_traits.h)
  return {std::move(k), widen(act_->v_cache.at(l))};
}

}  // namespace bdsl::bitnet
