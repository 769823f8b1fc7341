// Log-probabilities of a step's chosen token and of its most likely alternatives, as a server's
// `logprobs` reports them: the log-softmax of the model's logits at temperature 1, before any
// sampling setting (penalty, temperature, top-k, top-p) shaped the draw.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace bdsl::models {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
};

struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the most likely tokens first (ties: the lower id first)
};

inline constexpr uint32_t kMaxTopLogprobs = 20;  // alternatives a token lists at most (OpenAI's top_logprobs limit)

// A prompt's own tokens scored as the prompt is read (a server's `echo` with `logprobs`): row i's
// logits give the log-probability of next[i] (negative: row i is not scored) and of its `top`
// best alternatives (<= kMaxTopLogprobs).
struct PromptScoring {
  std::span<const int32_t> next;  // one per prompt token
  uint32_t top = 0;
  // In row order. Empty: no scoring (BatchDecoder::prefill then prefills plainly; prefill_scored refuses it).
  std::function<void(uint32_t row, const TokenLogprobs&)> on_scored;
};

// The `n` best ids of `logits` (at most all of them), the largest value first and equal values by
// the lower id: the device's order (argmax, top-k). One pass, for a few of a large vocabulary.
std::vector<int32_t> best_ids(std::span<const float> logits, size_t n);

// On the host, in double: logprob(l) = (l - M) - log(sum_j exp(l_j - M)), M the largest logit;
// `top` alternatives (at most the vocabulary). The device's twin is ops/head/token_logprobs.h.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, uint32_t top);

}  // namespace bdsl::models
