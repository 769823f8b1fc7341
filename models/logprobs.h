// Log-probabilities of a step's chosen token and of its most likely alternatives, as a server's
// `logprobs` reports them: the log-softmax of the model's logits at temperature 1, before any
// sampling setting (penalty, temperature, top-k, top-p) shaped the draw.
#pragma once
#include <cstdint>
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

// The `n` best ids of `logits` (at most all of them), the largest value first and equal values by
// the lower id: the device's order (argmax, top-k). One pass, for a few of a large vocabulary.
std::vector<int32_t> best_ids(std::span<const float> logits, size_t n);

// On the host, in double: logprob(l) = (l - M) - log(sum_j exp(l_j - M)), M the largest logit;
// `top` alternatives (at most the vocabulary). The device's twin is ops/head/token_logprobs.h.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, uint32_t top);

}  // namespace bdsl::models
