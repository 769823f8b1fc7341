// Comparing a model's logits with a base's, as llama-perplexity does: log-softmax in double,
// the KL divergence KL(base || other) of the two distributions, the negative log-likelihood of a
// token, and whether the top choices agree.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace bdsl::numerics {

// log softmax(logits), in double.
std::vector<double> log_softmax(std::span<const float> logits);
// sum_i p_i (log p_i - log q_i) with p = softmax(base), q = softmax(other); >= 0.
double kl_divergence(std::span<const float> base, std::span<const float> other);
// The same with the base given as log-probabilities (a saved base: models/kl_base_file.h).
double kl_divergence_from_log_probs(std::span<const float> base_log_probs, std::span<const float> other);
// -log softmax(logits)[token].
double negative_log_likelihood(std::span<const float> logits, uint32_t token);
// The index of the largest value (the lowest on ties).
uint32_t top_index(std::span<const float> logits);

}  // namespace bdsl::numerics
