#include "models/logprobs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace bdsl::models {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, uint32_t top) {
  if (token < 0 || size_t(token) >= logits.size())
    throw std::out_of_range("token " + std::to_string(token) + " outside " + std::to_string(logits.size()) + " logits");
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  const float mf = float(m);  // the largest logit itself: l - mf is exact near the top, where it matters
  for (float l : logits) sum += double(std::exp(l - mf));  // f32 exp, summed in double: ~1e-7 relative
  const double log_sum = std::log(sum);
  auto logprob = [&](int32_t id) { return float((double(logits[size_t(id)]) - m) - log_sum); };
  TokenLogprobs r{{token, logprob(token)}, {}};
  for (int32_t id : best_ids(logits, top)) r.top.push_back({id, logprob(id)});
  return r;
}

std::vector<int32_t> best_ids(std::span<const float> logits, size_t n) {
  n = std::min(n, logits.size());
  std::vector<int32_t> best;
  if (n == 0) return best;
  auto before = [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  best.reserve(n + 1);
  for (int32_t id = 0; id < int32_t(logits.size()); ++id) {
    if (best.size() == n && !before(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
    if (best.size() > n) best.pop_back();
  }
  return best;
}

}  // namespace bdsl::models
