// Many sequences at once, each in its own KV-cache slot: what the server's scheduler drives.
// A decode step advances every sequence in the batch by one token in one submission, each at its
// own position; a prefill puts a chunk of one sequence's prompt into its slot. A decoder whose
// max_step_prompt() is not 0 also takes prompt tokens in a step, beside the decoding sequences:
// a run of entries of one slot at consecutive positions. Slots are the caller's to assign: a
// slot's cache holds whatever was last written at each position. Each output's token is chosen
// under its entry's sampling settings (models/sampler.h): by the device where it samples, else on
// the host from the candidates, with the same arithmetic.
//
// Steps may be pipelined: submit() queues a step, collect() returns its outputs, and an entry may
// take its token from an output of the step submitted just before it (Entry::previous), so the
// next step is queued before the host has read the one before. Every decoder takes them; a
// decoder on a device overlaps them (the base class runs each step at its submit()).
#pragma once
#include <cstdint>
#include <deque>
#include <span>
#include <utility>
#include <vector>

#include "models/decoder_model.h"

namespace bdsl::models {

class BatchDecoder {
 public:
  struct Entry {
    uint32_t slot = 0;   // distinct within a step
    int32_t token = 0;   // decoded at `pos`: the slot's cache must hold positions 0..pos-1
    uint32_t pos = 0;
    SamplerOptions sampling{};  // how the output's token is chosen (temperature 0: greedy)
    // >= 0: `token` is ignored; the token is the output of entry `previous` of the step submitted
    // just before this one (submit()), which must have an output.
    int32_t previous = -1;
    // >= 0: the output carries its token's log-probability and this many alternatives'
    // (StepOutput::logprobs; at most max_top_logprobs(), where has_logprobs()). -1: none.
    int32_t logprobs = -1;
  };

  virtual ~BatchDecoder() = default;

  virtual uint32_t slots() const = 0;            // sequences at once
  virtual uint32_t context_length() const = 0;   // positions in each slot
  virtual uint32_t vocab_size() const = 0;
  virtual uint32_t top_k() const = 0;            // candidates each output holds; 0: greedy only
  virtual uint32_t max_prefill_chunk() const = 0;  // prompt tokens one prefill() takes at most
  virtual uint64_t device_bytes() const = 0;     // device memory the slots' caches and activations take
  // Entries one decode step takes at most (at least slots()).
  virtual uint32_t step_capacity() const { return slots(); }
  // Prompts of at most this many tokens may go through decode steps as runs of entries (their
  // arithmetic is then the step's, whatever else the steps carry); 0: prompts go through prefill().
  virtual uint32_t max_step_prompt() const { return 0; }
  // Whether outputs can carry log-probabilities (Entry::logprobs), and with how many alternatives.
  static constexpr uint32_t kMaxTopLogprobs = models::kMaxTopLogprobs;
  virtual bool has_logprobs() const { return false; }
  virtual uint32_t max_top_logprobs() const { return 0; }

  // Prompt tokens into `slot` at positions pos..pos+n-1 (n <= max_prefill_chunk()); returns the
  // output of the last one, its token chosen under `sampling`, with `logprobs` as Entry::logprobs.
  // With `scoring` (its on_scored given), the prompt's tokens are scored too
  // (DecoderModel::prefill_scored).
  virtual StepOutput prefill(uint32_t slot, std::span<const int32_t> tokens, uint32_t pos,
                             const SamplerOptions& sampling = {}, int32_t logprobs = -1, const PromptScoring& scoring = {}) = 0;
  // A prompt chunk that several slots take alike: slots whose caches hold the same tokens at
  // positions 0..pos-1 (a prompt asked for n times, or the same prompt twice) all take `tokens`
  // at pos..pos+n-1. Each output is what prefill() gives that slot alone: its token chosen under
  // its own sampling, with its own log-probabilities; the prompt is scored for none. The base class
  // runs prefill() for each; a device decoder runs the chunk once and copies its cache rows.
  struct Sharer {
    uint32_t slot = 0;  // distinct within a call
    SamplerOptions sampling{};
    int32_t logprobs = -1;  // as Entry::logprobs
  };
  virtual std::vector<StepOutput> prefill_shared(std::span<const Sharer> sharers, std::span<const int32_t> tokens, uint32_t pos);
  // One decode step for every entry (1 <= size <= step_capacity()); outputs in entry order. A slot
  // appears once, or (max_step_prompt() > 0) in a run at consecutive positions, in order: only the
  // last entry of a slot has an output (the others' argmax is -1, with no candidates). Entries
  // with `previous` go through submit(), which resolves them (the base class) or passes them on
  // (a device decoder, whose decode() is collect(submit(batch))).
  virtual std::vector<StepOutput> decode(std::span<const Entry> batch) = 0;

  // Queues a step as decode() runs it and returns its ticket; at most kMaxSubmitted steps are
  // submitted and not collected (std::logic_error past it). The base class runs it here, with
  // each `previous` entry's token taken from the outputs of the step submitted before; a device
  // decoder returns at once and passes those tokens on itself.
  static constexpr uint32_t kMaxSubmitted = 2;
  virtual uint64_t submit(std::span<const Entry> batch);
  // Waits for the step of `ticket` (the oldest one not collected, else std::logic_error) and
  // returns its outputs, as decode() does.
  virtual std::vector<StepOutput> collect(uint64_t ticket);

 protected:
  // Throws naming the slot where `sharers` is empty, names a slot twice or one past `slots`.
  static void check_sharers(std::span<const Sharer> sharers, uint32_t slots);

 private:
  // The token of output `index` of the step submitted last: throws std::invalid_argument naming
  // `entry` where there is none.
  static int32_t previous_token(const std::vector<StepOutput>& last, int32_t index, size_t entry);

  uint64_t submitted_ = 0;
  std::deque<std::pair<uint64_t, std::vector<StepOutput>>> done_;  // submitted, not collected
  std::vector<StepOutput> last_;  // the outputs of the step submitted last
};

}  // namespace bdsl::models
