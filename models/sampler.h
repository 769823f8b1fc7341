// Picks the next token from the top-k candidates (logits sorted descending, ties by the lower id):
// greedy at temperature 0, else llama.cpp's top-k, top-p and min-p, in that order, then the
// temperature and one counter-based draw (Philox4x32-10), so the same seed gives the same text
// on every machine, whatever else runs beside the sequence. This is the host twin of the device
// sampler, ops::sample_candidates (ops/head/sample_candidates.h says the arithmetic): both pick the
// same token from the same candidates.
#pragma once
#include <array>
#include <cstdint>
#include <span>

namespace bdsl::models {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy
  uint32_t top_k = 40;       // 0: no cut (the whole vocabulary where the model draws over it)
  float top_p = 0.95f;       // 1: off
  float min_p = 0.0f;        // keeps candidates at least min_p times as likely as the best; 0: off
  uint64_t seed = 0;
  // llama.cpp's repeat penalty, before everything above: each distinct token among the last
  // repeat_last_n of the sequence (prompt included) has its logit divided by it where positive,
  // multiplied where not. 1: off.
  float repeat_penalty = 1.0f;
  uint32_t repeat_last_n = 64;  // at most kMaxRepeatLastN; 0: off
};
inline constexpr uint32_t kMaxRepeatLastN = 1024;  // ops::kMaxRepeatLastN, the device's window

// Whether the settings change any logit (a penalty other than 1 over a window of at least one).
inline bool penalizes(const SamplerOptions& s) { return s.repeat_penalty != 1.0f && s.repeat_last_n > 0; }

// The repeat penalty as the device applies it (ops/head/repeat_penalty.h): each distinct token of
// `recent` (the window: the last repeat_last_n tokens) once, its logit l made l * (1 / penalty)
// where l > 0, else l * penalty (one rounding each; llama.cpp's l / penalty may differ in the
// last bit). Tokens outside the logits are ignored.
void apply_repeat_penalty(std::span<float> logits, std::span<const int32_t> recent, float penalty);

// Philox4x32-10 of a 128-bit counter under a 64-bit key (low word first); the sampler draws the
// first word at counter (token id, position, 0, 0) under the seed.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, uint64_t key);

// Throws std::invalid_argument for settings out of range, or for sampling (temperature > 0) with a
// model that returns no candidates (`candidates` 0: greedy only).
void check_sampling(const SamplerOptions& sampling, uint32_t candidates);

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);  // throws std::invalid_argument out of range

  // `ids` and `logits` describe the candidates, most likely first (ties: lower id first).
  // `counter` is the position the chosen token takes: each position draws afresh.
  int32_t sample(std::span<const int32_t> ids, std::span<const float> logits, uint32_t counter) const;
  // The draw over every logit of the vocabulary (token i's logit at logits[i]), for top_k 0 (no
  // cut): top-p with integer weights, exact, then min-p and the same Gumbel-max draw. The host twin
  // of ops/head/sample_vocabulary.h, which says the arithmetic. Greedy: the argmax.
  int32_t sample_vocabulary(std::span<const float> logits, uint32_t counter) const;
  const SamplerOptions& options() const { return options_; }
  float inverse_temperature() const;  // 0 when greedy

 private:
  SamplerOptions options_;
};

}  // namespace bdsl::models
