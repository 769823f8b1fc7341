#include "models/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace bdsl::models {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, uint32_t top) {
  if (token < 0 || size_t(token) >= logits.size())
    throw std::out_of_range("token " + std::to_string(token) + " outside " + std::to_string(logits.size()) + " logits");
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - m);
  const double log_sum = std::log(sum);
  auto logprob = [&](int32_t id) { return float((double(logits[size_t(id)]) - m) - log_sum); };
  TokenLogprobs r{{token, logprob(token)}, {}};
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t n = std::min<size_t>(top, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < n; ++i) r.top.push_back({ids[i], logprob(ids[i])});
  return r;
}

}  // namespace bdsl::models
