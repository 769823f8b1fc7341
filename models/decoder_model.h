// A decoder-only language model on a device, whatever its architecture: what the generator, the
// command line, the bench and the server drive. One sequence: the model keeps its KV cache, and
// the caller says at which position each token goes.
#pragma once
#include <cstdint>
#include <algorithm>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/logprobs.h"
#include "models/sampler.h"

namespace bdsl::models {

struct StepOutput {
  int32_t argmax = -1;                 // greedy choice (lowest id on ties)
  int32_t token = -1;                  // BatchDecoder: the choice under the entry's sampling
  std::vector<int32_t> top_ids;        // the top-k candidates, most likely first
  std::vector<float> top_logits;
  std::vector<float> logits;           // every logit, where the caller asked (a draw over the vocabulary needs them)
  std::optional<TokenLogprobs> logprobs;  // of `token`, where the caller asked (BatchDecoder::Entry::logprobs)
};

// Whether `sampling` draws over the whole vocabulary (top_k 0: no cut), not from the candidates.
inline bool draws_over_vocabulary(const SamplerOptions& sampling) { return sampling.temperature > 0.0f && sampling.top_k == 0; }
inline bool is_greedy(const SamplerOptions& sampling) { return sampling.temperature == 0.0f; }

// The token `out` gives under `sampling` for position `counter`, picked on the host: the argmax,
// models::Sampler over the candidates, or over every logit with top_k 0 (what the device sampler
// picks). A draw over the vocabulary without out.logits throws std::logic_error.
inline int32_t choose_on_host(const StepOutput& out, const SamplerOptions& sampling, uint32_t counter) {
  if (is_greedy(sampling)) return out.argmax;
  if (draws_over_vocabulary(sampling)) {
    if (out.logits.empty()) throw std::logic_error("a draw over the whole vocabulary (top_k 0) needs the step's logits");
    return Sampler(sampling).sample_vocabulary(out.logits, counter);
  }
  return Sampler(sampling).sample(out.top_ids, out.top_logits, counter);
}

class DecoderModel {
 public:
  virtual ~DecoderModel() = default;

  virtual uint32_t context_length() const = 0;
  virtual uint32_t vocab_size() const = 0;
  virtual uint32_t top_k() const = 0;  // candidates each step returns for sampling; 0: greedy only

  // Decodes `token` at position `pos` (the KV cache must hold positions 0..pos-1).
  virtual StepOutput step(int32_t token, uint32_t pos) = 0;
  // Prompt tokens at positions pos..pos+n-1 as one batch; returns what step() would for the last.
  virtual StepOutput prefill(std::span<const int32_t> tokens, uint32_t pos) = 0;
  // The same, choosing nothing: the tokens' rows into the KV cache (a model may skip its LM head).
  virtual void fill_cache(std::span<const int32_t> tokens, uint32_t pos) { prefill(tokens, pos); }
  // The same, calling on_row(i, logits of tokens[i]) for every token in order (perplexity).
  virtual void prefill_all_logits(std::span<const int32_t> tokens, uint32_t pos,
                                  const std::function<void(uint32_t, std::span<const float>)>& on_row) = 0;
  // prefill() that also scores the prompt's tokens (models::PromptScoring); the last token's output
  // carries its logits (what a draw over the vocabulary or log-probabilities take).
  virtual StepOutput prefill_scored(std::span<const int32_t> tokens, uint32_t pos, const PromptScoring& scoring) = 0;
  // Greedy decoding that feeds itself: `token` at `pos`, then each step's argmax at the next
  // position, up to `max_steps` steps; on_token gets each argmax and returns false to stop.
  // Returns the steps whose tokens on_token received.
  virtual uint32_t decode_greedy(int32_t token, uint32_t pos, uint32_t max_steps,
                                 const std::function<bool(int32_t)>& on_token) = 0;
  // The same with each token drawn under `sampling` (models/sampler.h; temperature 0: greedy),
  // the draw of the token at position p with counter p; needs top_k() > 0 to sample.
  virtual uint32_t decode_sampled(int32_t token, uint32_t pos, uint32_t max_steps, const SamplerOptions& sampling,
                                  const std::function<bool(int32_t)>& on_token) = 0;
  virtual std::vector<float> logits() const = 0;  // of the last step
};

// choose_on_host for the step `model` just ran (`out`), reading the model's logits first where the
// draw takes every logit (top_k 0).
inline int32_t choose_after_step(const DecoderModel& model, StepOutput& out, const SamplerOptions& sampling, uint32_t counter) {
  if (draws_over_vocabulary(sampling) && out.logits.empty()) out.logits = model.logits();
  return choose_on_host(out, sampling, counter);
}

// The output prefill() gives for a prompt whose last token's logits are `logits`, on the host with
// the device's order (argmax, the model's top-k candidates: value descending, ties by the lower id).
inline StepOutput output_of_logits(std::vector<float> logits, uint32_t top_k) {
  StepOutput out;
  out.logits = std::move(logits);
  const std::vector<int32_t> ids = best_ids(out.logits, std::max<size_t>(1, top_k));
  out.argmax = ids.empty() ? -1 : ids[0];
  if (top_k)
    for (int32_t id : ids) out.top_ids.push_back(id), out.top_logits.push_back(out.logits[size_t(id)]);
  return out;
}

// Checks a PromptScoring against the tokens it scores and the vocabulary.
inline void check_scoring(const PromptScoring& s, size_t tokens, uint32_t vocab) {
  if (!s.on_scored) throw std::invalid_argument("prompt scoring: no on_scored callback (use prefill() to score nothing)");
  if (s.next.size() != tokens)
    throw std::invalid_argument("prompt scoring: " + std::to_string(s.next.size()) + " next tokens for " +
                                std::to_string(tokens) + " prompt tokens");
  if (s.top > kMaxTopLogprobs)
    throw std::invalid_argument("prompt scoring: " + std::to_string(s.top) + " alternatives; at most " +
                                std::to_string(kMaxTopLogprobs));
  for (int32_t id : s.next)
    if (id >= 0 && uint32_t(id) >= vocab)
      throw std::invalid_argument("prompt scoring: token " + std::to_string(id) + " is outside the vocabulary");
}

// out.logprobs for the token chosen after the step `model` just ran, with `top` alternatives (-1:
// none asked), from the model's logits on the host (models::token_logprobs).
inline void logprobs_after_step(const DecoderModel& model, StepOutput& out, int32_t top) {
  if (top < 0) return;
  const std::vector<float> read = out.logits.empty() ? model.logits() : std::vector<float>{};
  out.logprobs = token_logprobs(out.logits.empty() ? read : out.logits, out.token, uint32_t(top));
}

}  // namespace bdsl::models
