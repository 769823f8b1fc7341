#include "models/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace bdsl::models {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, uint64_t key) {
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = uint64_t(0xD2511F53u) * c[0], p1 = uint64_t(0xCD9E8D57u) * c[2];
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c[1] ^ k0, n2 = uint32_t(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0, c[1] = uint32_t(p1), c[2] = n2, c[3] = uint32_t(p0);
  }
  return c;
}

namespace {

// The logit's f32 bits as a u32 of the same order (-0 as +0), as the device maps them.
uint32_t order_key(float l) {
  const uint32_t bits = l == 0.0f ? 0u : std::bit_cast<uint32_t>(l);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

// -log(u), u in (0, 1), as the device computes it: near 1 by the series of -log(1 - t) in the
// exact t = 1 - u, each operation rounded apart; elsewhere the library's log.
float minus_log(float u) {
  const float t = 1.0f - u;
  if (!(t < 0.00390625f)) return -std::log(u);
  const float s1 = t * 0.25f;
  const float s2 = s1 + 0.333333343f;
  const float s3 = s2 * t;
  const float s4 = s3 + 0.5f;
  const float s5 = s4 * t;
  const float s6 = s5 * t;
  return t + s6;
}

// One candidate's Gumbel-max score, as ops/head/draw_support.h's gumbel_score.
float gumbel_score(float logit, float best, float inverse_t, uint32_t id, uint32_t counter, uint64_t seed) {
  const uint32_t bits = philox4x32_10({id, counter, 0, 0}, seed)[0];
  const float u = (float(bits >> 8) + 0.5f) * 0x1.0p-24f;
  const float gumbel = -std::log(minus_log(u));
  const float scaled = (logit - best) * inverse_t;  // rounded apart, as the device does (no fma)
  return scaled + gumbel;
}

}  // namespace

Sampler::Sampler(const SamplerOptions& options) : options_(options) {
  if (!(options.temperature >= 0.0f) || !std::isfinite(options.temperature))
    throw std::invalid_argument("temperature must be >= 0, got " + std::to_string(options.temperature));
  if (!(options.top_p > 0.0f && options.top_p <= 1.0f))
    throw std::invalid_argument("top-p must be in (0, 1], got " + std::to_string(options.top_p));
  if (!(options.min_p >= 0.0f && options.min_p <= 1.0f))
    throw std::invalid_argument("min-p must be in [0, 1], got " + std::to_string(options.min_p));
  if (!(options.repeat_penalty > 0.0f) || !std::isfinite(options.repeat_penalty))
    throw std::invalid_argument("repeat penalty must be > 0 (1: off), got " + std::to_string(options.repeat_penalty));
  if (options.repeat_last_n > kMaxRepeatLastN)
    throw std::invalid_argument("repeat-last-n must be at most " + std::to_string(kMaxRepeatLastN) + ", got " +
                                std::to_string(options.repeat_last_n));
}

void apply_repeat_penalty(std::span<float> logits, std::span<const int32_t> recent, float penalty) {
  const float inverse = 1.0f / penalty;
  std::vector<int32_t> seen;
  for (int32_t t : recent) {
    if (t < 0 || size_t(t) >= logits.size() || std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    float& l = logits[size_t(t)];
    l = l > 0.0f ? l * inverse : l * penalty;
  }
}

void check_sampling(const SamplerOptions& sampling, uint32_t candidates) {
  const Sampler check(sampling);  // throws for settings out of range
  if (sampling.temperature > 0 && candidates == 0)
    throw std::invalid_argument("sampling (temperature > 0) needs a model loaded with candidates (top-k); this one is greedy-only");
}

float Sampler::inverse_temperature() const {
  if (!(options_.temperature > 0.0f)) return 0.0f;
  const float inverse = 1.0f / options_.temperature;
  return std::isfinite(inverse) ? inverse : 0.0f;  // a temperature too small to invert: greedy
}

int32_t Sampler::sample(std::span<const int32_t> ids, std::span<const float> logits, uint32_t counter) const {
  if (ids.empty() || ids.size() != logits.size())
    throw std::invalid_argument("sampler: " + std::to_string(ids.size()) + " ids but " +
                                std::to_string(logits.size()) + " logits");
  // Every step below is ops::sample_candidates' arithmetic, in f32 and in its order.
  const float best = logits[0];
  size_t n = ids.size();
  if (options_.top_k > 0) n = std::min<size_t>(n, options_.top_k);
  if (options_.top_p < 1.0f) {
    std::vector<float> w(n);
    float total = 0;
    for (size_t i = 0; i < n; ++i) total += w[i] = std::exp(logits[i] - best);
    const float goal = options_.top_p * total;
    float mass = 0;
    size_t m = 0;
    while (m < n && mass < goal) mass += w[m++];
    n = std::max<size_t>(m, 1);
  }
  if (options_.min_p > 0.0f) {
    const float floor_value = best + std::log(options_.min_p);
    size_t m = 1;
    while (m < n && logits[m] >= floor_value) ++m;
    n = m;
  }
  const float inverse_t = inverse_temperature();
  if (inverse_t == 0.0f) n = 1;
  size_t chosen = 0;
  float chosen_score = -INFINITY;
  for (size_t i = 0; i < n; ++i) {
    const float score = gumbel_score(logits[i], best, inverse_t, uint32_t(ids[i]), counter, options_.seed);
    if (i == 0 || score > chosen_score) chosen = i, chosen_score = score;
  }
  return ids[chosen];
}

int32_t Sampler::sample_vocabulary(std::span<const float> logits, uint32_t counter) const {
  if (logits.empty()) throw std::invalid_argument("sampler: no logits");
  size_t argmax = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[argmax]) argmax = i;
  const float inverse_t = inverse_temperature();
  if (inverse_t == 0.0f) return int32_t(argmax);
  const float best = logits[argmax];
  // Top-p: the largest key K whose tokens at or above it weigh at least the goal, in integers.
  const bool cut = options_.top_p < 1.0f;
  uint32_t threshold = 0;
  if (cut) {
    std::vector<std::pair<uint32_t, uint64_t>> keyed(logits.size());  // (key, weight)
    unsigned __int128 total = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      const float below_best = logits[i] - best;
      const float e = std::min(std::exp(below_best), 1.0f);
      const uint64_t w = uint32_t(e * 2147483648.0f);
      keyed[i] = {order_key(logits[i]), w};
      total += w;
    }
    const uint64_t p = uint32_t(options_.top_p * 4294967296.0f);
    const uint64_t goal = uint64_t((p * total + 0xffffffffu) >> 32);  // ceil(p * total / 2^32)
    std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    uint64_t mass = 0;
    for (size_t i = 0; i < keyed.size();) {
      size_t j = i;  // every token of this key
      while (j < keyed.size() && keyed[j].first == keyed[i].first) mass += keyed[j++].second;
      threshold = keyed[i].first;
      if (mass >= goal) break;
      i = j;
    }
  }
  const float floor_value = best + std::log(options_.min_p);
  size_t chosen = logits.size();
  float chosen_score = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (cut && order_key(logits[i]) < threshold) continue;
    if (options_.min_p != 0.0f && !(logits[i] >= floor_value)) continue;
    const float score = gumbel_score(logits[i], best, inverse_t, uint32_t(i), counter, options_.seed);
    if (chosen == logits.size() || score > chosen_score) chosen = i, chosen_score = score;
  }
  return chosen == logits.size() ? 0 : int32_t(chosen);
}

}  // namespace bdsl::models
