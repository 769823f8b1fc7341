// Picks the next token from the GPU's top-k candidates (logits sorted descending, k <= 128):
// greedy at temperature 0, else temperature, top-k, min-p, top-p and a seeded generator, so the
// same seed gives the same text on every machine.
#pragma once
#include <cstdint>
#include <span>

namespace bdsl::models {

struct SamplerOptions {
  float temperature = 0.0f;  // 0: greedy
  uint32_t top_k = 40;       // 0: every candidate the GPU returned
  float top_p = 0.95f;       // 1: off
  float min_p = 0.0f;        // keeps candidates at least min_p times as likely as the best; 0: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);

  // `ids` and `logits` describe the candidates, most likely first (ties: lower id first).
  int32_t sample(std::span<const int32_t> ids, std::span<const float> logits);

 private:
  double next_uniform();  // in [0, 1)

  SamplerOptions options_;
  uint64_t state_;
};

}  // namespace bdsl::models
