#include "models/numerics/logit_stats.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace bdsl::numerics {

std::vector<double> log_softmax(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("log_softmax of no logits");
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - top);
  const double log_z = top + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - log_z;
  return out;
}

namespace {

// sum_i p_i (lp_i - lq_i), p = exp(lp); terms with p = 0 add nothing.
template <class LogProbs>
double kl_from_log_probs(const LogProbs& lp, std::span<const float> other) {
  if (lp.size() != other.size())
    throw std::invalid_argument("kl_divergence: " + std::to_string(lp.size()) + " base values but " +
                                std::to_string(other.size()) + " logits");
  const auto lq = log_softmax(other);
  double kl = 0;
  for (size_t i = 0; i < lq.size(); ++i) {
    const double l = lp[i];
    if (l == -INFINITY) continue;  // -inf - -inf would be NaN
    kl += std::exp(l) * (l - lq[i]);
  }
  return std::max(kl, 0.0);  // rounding can leave a tiny negative sum for equal distributions
}

}  // namespace

double kl_divergence(std::span<const float> base, std::span<const float> other) {
  if (base.size() != other.size())
    throw std::invalid_argument("kl_divergence: " + std::to_string(base.size()) + " base logits but " +
                                std::to_string(other.size()) + " others");
  return kl_from_log_probs(log_softmax(base), other);
}

double kl_divergence_from_log_probs(std::span<const float> base_log_probs, std::span<const float> other) {
  return kl_from_log_probs(base_log_probs, other);
}

double negative_log_likelihood(std::span<const float> logits, uint32_t token) {
  if (token >= logits.size())
    throw std::out_of_range("token " + std::to_string(token) + " outside " + std::to_string(logits.size()) + " logits");
  return -log_softmax(logits)[token];
}

uint32_t top_index(std::span<const float> logits) {
  return uint32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace bdsl::numerics
