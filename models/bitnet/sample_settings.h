// A sequence's sampling settings (models/sampler.h) as the device sampler reads them
// (ops/head/sample_candidates.h), with the draw's counter: the chosen token's position.
#pragma once
#include <cstdint>

#include "models/sampler.h"
#include "ops/head.h"

namespace bdsl::bitnet {

inline ops::SampleParams sample_params(const models::SamplerOptions& sampling, uint32_t counter) {
  const models::Sampler sampler(sampling);  // throws for settings out of range
  return {sampler.inverse_temperature(), sampling.top_k, sampling.top_p, sampling.min_p, sampling.seed, counter};
}

}  // namespace bdsl::bitnet
