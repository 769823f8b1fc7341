#include "models/sampler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace bdsl::models {

Sampler::Sampler(const SamplerOptions& options) : options_(options), state_(options.seed) {
  if (!(options.temperature >= 0.0f) || !std::isfinite(options.temperature))
    throw std::invalid_argument("temperature must be >= 0, got " + std::to_string(options.temperature));
  if (!(options.top_p > 0.0f && options.top_p <= 1.0f))
    throw std::invalid_argument("top-p must be in (0, 1], got " + std::to_string(options.top_p));
  if (!(options.min_p >= 0.0f && options.min_p <= 1.0f))
    throw std::invalid_argument("min-p must be in [0, 1], got " + std::to_string(options.min_p));
}

double Sampler::next_uniform() {  // splitmix64: tiny, fast, identical everywhere
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const int32_t> ids, std::span<const float> logits) {
  if (ids.empty() || ids.size() != logits.size())
    throw std::invalid_argument("sampler: " + std::to_string(ids.size()) + " ids but " +
                                std::to_string(logits.size()) + " logits");
  if (options_.temperature == 0.0f) return ids[0];
  size_t n = ids.size();
  if (options_.top_k > 0) n = std::min<size_t>(n, options_.top_k);
  // Min-p (as llama.cpp, on the logits before the temperature): p_i / p_0 >= min_p.
  if (options_.min_p > 0.0f) {
    const double floor = double(logits[0]) + std::log(double(options_.min_p));
    size_t kept = 1;
    while (kept < n && double(logits[kept]) >= floor) ++kept;
    n = kept;
  }
  // Softmax at the temperature, in double so tiny tails stay ordered.
  std::vector<double> p(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += p[i] = std::exp(double(logits[i] - logits[0]) / options_.temperature);
  // Top-p: the smallest prefix whose mass reaches top_p (candidates are already sorted).
  double mass = 0;
  size_t keep = 0;
  while (keep < n && mass < options_.top_p * sum) mass += p[keep++];
  const double r = next_uniform() * mass;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i)
    if ((acc += p[i]) > r) return ids[i];
  return ids[keep - 1];
}

}  // namespace bdsl::models
