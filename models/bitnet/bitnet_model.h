// BitNet b1.58 on a Vulkan device. The whole token — embedding, every layer, final norm, LM head,
// argmax and top-k — is recorded ONCE into one command buffer and replayed for every token: the
// token id and position live in a small host-visible "step state" buffer (ops/common/step_state.h), so
// nothing is re-recorded, and one submit plus a few bytes of read-back make a token.
//
// Per layer, five barrier-separated steps: QKV (attn_norm fused, RoPE + KV-cache write after),
// attention, attn_output (attn_sub_norm fused, residual added), gate/up (ffn_norm fused,
// relu^2 * up), ffn_down (ffn_sub_norm fused, residual added).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/bitnet_config.h"
#include "models/decoder_model.h"
#include "models/formats/gguf.h"
#include "models/bitnet/bitnet_pipelines.h"
#include "models/bitnet/device_weights.h"
#include "models/bitnet/greedy_head.h"
#include "models/bitnet/prefill_pipelines.h"
#include "runtime/graph.h"

namespace bdsl::bitnet {

struct ModelOptions {
  uint32_t top_k = 0;         // candidates returned per token for sampling (<= 128); 0: greedy only
  bool dump = false;          // copy every materialized intermediate out after each token
  bool timestamps = false;    // GPU time per dispatch
  PrefillProjections prefill_projections = PrefillProjections::Auto;  // see prefill_pipelines.h
  // Long prompt blocks attend on F16 tensor cores where the device has them
  // (PrefillPipelines::attention_coopmat); false: attention_prefill everywhere.
  bool tensor_core_attention = true;
  DecodeTuning decode_tuning;  // kernel shapes of the decode projections (bitnet_pipelines.h)
  // decode_greedy picks each token from the LM head's int8 shadow and the few F16 rows that may
  // win (ops/head/lm_head_pruned.h): the same token as the full head, half its bytes; the shadow takes
  // vocab x (dim + 12) more bytes of device memory. Not with dump. On a CPU device (lavapipe)
  // that memory is host memory beside the F16 head the file's pages already hold, and the pruned
  // head was no faster there than the full one: `run` asks for it where greedy_head_pays.
  bool greedy_head = true;
  // On a CPU device, the weights are read where they lie in the mapped file, not copied
  // (models/bitnet/device_weights.h); false copies them as on any device.
  bool weights_in_place = true;
  // decode_greedy and decode_sampled (with the pruned head) replay this many tokens a submission:
  // the recording of one token written out that many times in one command buffer, so the tokens
  // between meet at a barrier, not at a queue submission (~35 us each on the H200, run 28). The
  // tokens come in groups of as many (the host sees the first of a group when the group is done).
  // 1, or with timestamps: a token a submission.
  uint32_t tokens_per_replay = 8;
  // RMSNorm's scale at bitnet.cpp's rounding points in every kernel (ops/common/norm_scale.h): the
  // int8 activations, so the int32 accumulators, are bitnet.cpp's bit for bit, at a price (decode
  // 5-6% slower on the H100, batched steps ~2%; bench/RESULTS.md run 35). Needs a device with f64
  // (shaderFloat64).
  bool exact_norm_scale = false;
};

using models::StepOutput;

// Whether the pruned head's int8 shadow (ModelOptions::greedy_head) is worth holding on `device`:
// where it is device memory of its own, not on a CPU device (bench/RESULTS.md run 20: on lavapipe
// without it, the 2B loads in 0.15 s instead of 0.83, peaks 315 MiB lower and decodes as fast).
bool greedy_head_pays(const rt::DeviceInfo& device);

// Device memory a loaded model holds, by class (bytes).
struct DeviceMemory {
  uint64_t weights = 0;      // the tensors as uploaded
  uint64_t weights_in_place = 0;  // of `weights`, those read where they lie in the mapped file (no copy)
  uint64_t head_shadow = 0;  // the LM head's int8 shadow (ModelOptions::greedy_head)
  uint64_t kv_cache = 0;     // K and V of every layer for the whole context
  uint64_t activations = 0;  // everything else: activations, RoPE table, partials, candidates
  uint64_t total() const { return weights + head_shadow + kv_cache + activations; }
};

class BitNetModel final : public models::DecoderModel {
 public:
  BitNetModel(rt::Context& ctx, const models::GgufFile& file, const models::BitNetConfig& config,
              const ModelOptions& options = {}, const UploadProgress& progress = {});
  ~BitNetModel() override;

  // Decodes `token` at position `pos` (the KV cache must hold positions 0..pos-1).
  StepOutput step(int32_t token, uint32_t pos) override;
  // Greedy decoding that feeds itself: decodes `token` at `pos`, then each step's argmax at the
  // next position, for up to `max_steps` steps (positions pos .. pos + max_steps - 1 must fit the
  // context). on_token gets each step's argmax in order and returns false to stop. The device
  // picks the next token itself (ops/head/argmax.h, advance), so the host keeps replays queued and the
  // GPU never waits for it; a stop may leave one step beyond it run (its cache row is past the
  // returned count, and logits() and dumps are those of the last step run). Returns the steps
  // whose tokens on_token received.
  uint32_t decode_greedy(int32_t token, uint32_t pos, uint32_t max_steps,
                         const std::function<bool(int32_t)>& on_token) override;
  // The same with each token drawn on the device from the step's candidates under `sampling`
  // (ops/head/sample_candidates.h: what models::Sampler draws; temperature 0: decode_greedy).
  // Needs ModelOptions::top_k.
  uint32_t decode_sampled(int32_t token, uint32_t pos, uint32_t max_steps, const models::SamplerOptions& sampling,
                          const std::function<bool(int32_t)>& on_token) override;
  // Runs a block of prompt tokens at positions pos..pos+n-1 as one batch (matrix-matrix
  // projections, causal attention over the block), fills the KV cache, and returns what step()
  // would return for the last token. The graph is recorded once per block length (the last 32
  // lengths are kept) and replayed.
  StepOutput prefill(std::span<const int32_t> tokens, uint32_t pos) override;
  // The same without the LM head: only the cache.
  void fill_cache(std::span<const int32_t> tokens, uint32_t pos) override;
  static constexpr uint32_t kMaxPrefillBlock = kMaxPromptBlock;  // longer prompts run in blocks
  // prefill() that also gives every token's logits (lm_head_batch: lm_head's f32 arithmetic, bit
  // for bit, as the decode graph's tail computes the last token's):
  // on_row(i, logits of tokens[i]) in order, vocab_size() floats each (perplexity).
  void prefill_all_logits(std::span<const int32_t> tokens, uint32_t pos,
                          const std::function<void(uint32_t, std::span<const float>)>& on_row) override;
  // prefill() scoring the prompt's tokens on the device from the same logits (ops::token_logprobs,
  // with a top-20 of its own for the alternatives): a few words a row come back, not the row. The
  // last token's output is taken from its row on the host (models::output_of_logits).
  StepOutput prefill_scored(std::span<const int32_t> tokens, uint32_t pos, const models::PromptScoring& scoring) override;

  std::vector<float> logits() const override;  // of the last step
  uint32_t context_length() const override { return config_.context_length; }
  uint32_t vocab_size() const override { return config_.vocab_size; }
  uint32_t top_k() const override { return pipelines_->top_k; }
  // The intermediates of the last step by llama.cpp's names (inp_embd, Qcur-N, ...), with dump.
  std::map<std::string, std::vector<float>> dumps() const;
  std::vector<std::string> dump_names() const;  // in graph order
  // Layer `l`'s cached K and V at positions 0..positions-1, widened from F16: [positions, kv_dim], K in
  // the file's row order.
  std::pair<std::vector<float>, std::vector<float>> kv_cache(uint32_t l, uint32_t positions) const;

  const models::BitNetConfig& config() const { return config_; }
  const BitNetPipelines& pipelines() const { return *pipelines_; }
  rt::GraphStats stats() const { return graph_->stats(); }
  std::vector<double> timestamps_ns() const { return graph_->timestamps_ns(); }
  double gpu_span_ns() const { return graph_->span_ns(); }  // the last token's GPU time
  std::vector<std::string> operation_names() const { return graph_->operation_names(); }
  // Rows the pruned head's last token computed exactly (upper bound >= the best lower bound; the
  // argmax and its ties among them): how well the int8 shadow's bounds prune on this model. 0
  // without ModelOptions::greedy_head or before decode_greedy ran it.
  uint32_t greedy_candidate_rows() const;
  // Rows decode_sampled's pruned head computed exactly for its last token (those that may be among
  // the k best: ops/head/lm_head_pruned.h's candidate list). 0 without it or before it ran.
  uint32_t sampled_candidate_rows() const;
  // The same for decode_greedy's recording (the pruned head): empty without ModelOptions::greedy_head.
  std::vector<double> greedy_timestamps_ns() const { return greedy_graph_ ? greedy_graph_->timestamps_ns() : std::vector<double>{}; }
  std::vector<std::string> greedy_operation_names() const {
    return greedy_graph_ ? greedy_graph_->operation_names() : std::vector<std::string>{};
  }
  // Builds and records decode_sampled's draw over the whole vocabulary (top_k 0) now, not at its
  // first use: a server that expects such requests calls it before it takes any. Nothing without
  // the model's top_k, with dumps, or when done.
  void prepare_vocabulary_draw();
  // The same for decode_sampled's recording with top_k 0 (the draw over the whole vocabulary);
  // empty before it ran.
  std::vector<double> vocabulary_timestamps_ns() const {
    return vocabulary_graph_ ? vocabulary_graph_->timestamps_ns() : std::vector<double>{};
  }
  std::vector<std::string> vocabulary_operation_names() const {
    return vocabulary_graph_ ? vocabulary_graph_->operation_names() : std::vector<std::string>{};
  }
  // The same for decode_sampled's recording with the pruned head: empty without it.
  std::vector<double> sampled_timestamps_ns() const { return sampled_graph_ ? sampled_graph_->timestamps_ns() : std::vector<double>{}; }
  std::vector<std::string> sampled_operation_names() const {
    return sampled_graph_ ? sampled_graph_->operation_names() : std::vector<std::string>{};
  }
  uint64_t weight_bytes() const { return weights_.bytes; }
  // By class, for the line `run` prints and the bench (the prompt path's buffers, allocated on the
  // first prefill, not included).
  DeviceMemory device_memory() const;
  // The same for the last prefill block's graph (empty / 0 before the first prefill).
  std::vector<double> prefill_timestamps_ns() const;
  double prefill_gpu_span_ns() const;
  std::vector<std::string> prefill_operation_names() const;
  rt::GraphStats prefill_stats() const;

 private:
  friend class BitNetBatchDecoder;  // steps many sequences over these weights (batch_decoder.h)
  struct Activations;
  struct PrefillBlock;
  // What a recording over kLogitRows prompt rows does after their logits: nothing more, or score
  // each row's next token (with the alternatives' top-20 or without).
  enum class RowsMode : uint8_t { Logits, Scored, ScoredTop };
  // Prefills `tokens` (blocks of kMaxPrefillBlock) and runs the final norm and the f32 LM head
  // over every row, kLogitRows rows a replay: before(i, rows) ahead of each replay (i: its first
  // row's index in tokens), after(i, rows) once it is done, the rows' logits in PrefillBlock.
  void for_logit_rows(std::span<const int32_t> tokens, uint32_t pos, RowsMode mode,
                      const std::function<void(uint32_t, uint32_t)>& before,
                      const std::function<void(uint32_t, uint32_t)>& after);
  void record_row_scoring(rt::Graph& g, uint32_t rows, RowsMode mode);  // prefill_scoring.cpp
  struct DumpSlot {
    std::string name;
    uint64_t offset, floats;
  };
  void record();
  // A penalized recording's parameters (rt::Graph::parameter), set before its replays.
  struct PenaltyParameters {
    rt::Parameter<float> penalty, inverse_penalty;
    rt::Parameter<uint32_t> last_n;
  };
  // The LM head at the end of a token's recording: the full one (logits, argmax, top-k; step() and
  // the prompt path), the pruned one of decode_greedy or decode_sampled, or decode_sampled's draw
  // over the whole vocabulary (top_k 0); all but the full one also write the next token's embedding.
  enum class Tail { Full, PrunedGreedy, PrunedSampled, VocabularySampled };
  // Into graph_: the whole token; with `penalty`, a Full or VocabularySampled tail's logits take
  // the repeat penalty first (its parameters go there).
  // `copies`: the token's recording that many times in one command buffer (ModelOptions::tokens_per_replay).
  void record_token(Tail tail, std::optional<PenaltyParameters>* penalty = nullptr, uint32_t copies = 1);
  // `group`, recording `tail` tokens_per_replay times now if it is not yet (null: groups are off,
  // with timestamps, dumps or tokens_per_replay 1, or not yet needed: a run of fewer `steps`). At
  // first use: most processes never need one.
  rt::Graph* group_of(Tail tail, std::unique_ptr<rt::Graph>& group, uint32_t steps);
  // record_token(tail, copies) into a recording of its own, graph_ (the full token) kept as it is.
  std::unique_ptr<rt::Graph> record_aside(Tail tail, uint32_t copies);
  void record_embedding(rt::Graph& g);  // x = the step state's token's embedding
  void record_tail(rt::Graph& g, Tail tail = Tail::Full, std::optional<PenaltyParameters>* penalty = nullptr);  // final norm, LM head, argmax (+ top-k) on the x buffer
  // The final norm, every logit and argmax's first pass (the full tail's and the vocabulary draw's start).
  void record_logits(rt::Graph& g, std::optional<PenaltyParameters>* penalty = nullptr);
  void record_vocabulary_draw(rt::Graph& g, std::optional<PenaltyParameters>* penalty = nullptr);  // Tail::VocabularySampled's
  // decode_sampled with a repeat penalty: the full head's logits penalized on the device, then the
  // draw (or argmax) of the full recording, or over the whole vocabulary for top_k 0.
  uint32_t decode_penalized(int32_t token, uint32_t pos, uint32_t max_steps, const models::SamplerOptions& sampling,
                            const std::function<bool(int32_t)>& on_token);
  void prepare_penalized(bool vocabulary);  // records its graph at first use
  // The tokens at positions pos.. into the device's history (what the repeat penalty reads).
  void write_history(std::span<const int32_t> tokens, uint32_t pos);
  void record_embed_graph();  // embed_graph_: the first token's embedding for the pruned and vocabulary recordings
  void wait_idle();  // for every replay of any recording
  std::unique_ptr<PrefillBlock> make_prefill_buffers();
  // On prefill_'s buffers; coop_chunks > 0: attention on PrefillPipelines::attention_coopmat in
  // that many position chunks (0: on attention).
  std::unique_ptr<rt::Graph> record_prefill_block(uint32_t n, bool head, uint32_t coop_chunks);
  void run_prefill(std::span<const int32_t> tokens, uint32_t pos, bool head);  // head: the last token's tail too
  const PrefillPipelines& prefill_pipelines();  // built at the first prompt block (or batched step)
  StepOutput read_step_output() const;
  void check_tokens(std::span<const int32_t> tokens, uint32_t pos) const;
  // A decode layer's ops in order (QKV with RoPE and the cache write, ... ffn_down).
  enum class LayerOp { Qkv, Attention, AttnOutput, GateUp, FfnDown };
  std::vector<rt::Arg> layer_args(uint32_t l, LayerOp op) const;
  void record_op(uint32_t l, LayerOp op);
  void record_layer(uint32_t l);
  void write_step_state(uint32_t token, uint32_t pos);
  void write_sampling(const models::SamplerOptions& sampling);  // the decode graph's draw settings
  void check_steps(uint32_t pos, uint32_t max_steps) const;
  // decode_greedy / decode_sampled with the host after every step (dumps): step(), then the token
  // chosen on the host (models::choose_on_host), fed to the next step.
  uint32_t step_by_step(int32_t token, uint32_t pos, uint32_t max_steps, const models::SamplerOptions& sampling,
                        const std::function<bool(int32_t)>& on_token);
  // Replays `graph`, which feeds itself through the step state, from `token` at `pos`.
  // `graph` replays one token; `group`, where given, tokens_per_replay of them, taken while at
  // least that many are left.
  uint32_t replay_feeding(rt::Graph& graph, rt::Graph* group, int32_t token, uint32_t pos, uint32_t max_steps,
                          const std::function<bool(int32_t)>& on_token);
  // The pruned LM head (greedy and sampled decoding): asked for, no dumps, a shape it takes.
  bool wants_greedy_head() const;
  std::unique_ptr<BitNetPipelines> make_pipelines() const;
  void dump(const rt::Buffer& src, uint64_t floats, std::string name);

  rt::Context& ctx_;
  models::BitNetConfig config_;
  ModelOptions options_;
  std::unique_ptr<BitNetPipelines> pipelines_;
  DeviceWeights weights_;
  std::unique_ptr<Activations> act_;
  std::unique_ptr<rt::Graph> graph_;
  std::optional<GreedyHead> greedy_head_;
  std::unique_ptr<rt::Graph> greedy_graph_;   // decode_greedy's recording, with the pruned head
  std::unique_ptr<rt::Graph> sampled_graph_;  // decode_sampled's, with the pruned head
  // The same (and vocabulary_graph_), ModelOptions::tokens_per_replay tokens a replay (null: 1 a
  // replay), each recorded at its first use by group_of (null where groups are off).
  std::unique_ptr<rt::Graph> greedy_group_, sampled_group_, vocabulary_group_;
  std::unique_ptr<rt::Graph> vocabulary_graph_;  // decode_sampled's with top_k 0: the full head, every logit drawn from
  // decode_sampled's with a repeat penalty (prepare_penalized): the full recording's tail, and the
  // vocabulary draw, each with the penalty on the logits first.
  std::unique_ptr<rt::Graph> penalized_graph_, penalized_vocabulary_graph_;
  std::optional<PenaltyParameters> penalized_parameters_, penalized_vocabulary_parameters_;
  // The embedding of the step state's token alone: decode_greedy's first replay needs it (the
  // greedy recording starts with layer 0; each replay leaves the next token's embedding in x).
  std::unique_ptr<rt::Graph> embed_graph_;
  std::unique_ptr<PrefillPipelines> prefill_pipelines_;
  std::unique_ptr<PrefillBlock> prefill_;  // the prompt path's buffers and recordings
  std::vector<DumpSlot> dump_slots_;
  uint64_t dump_floats_ = 0;
  uint32_t epoch_ = 0;  // decode submissions so far (StepState::epoch)
};

}  // namespace bdsl::bitnet
