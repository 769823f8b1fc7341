// What the device samplers share (ops/head/sample_candidates.h, ops/head/sample_vocabulary.h):
// one candidate's Gumbel-max score and the step state's advance. Internal to ops/head.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>

#include "dsl/dsl.h"

namespace bdsl::ops {

// (value - best) * inverse_temperature - log(-log(u)), u from Philox4x32-10 at counter (id,
// counter, 0, 0) under the seed (seed_low, seed_high), each operation rounded apart as the host
// twin (models::Sampler) computes it; near u = 1 (the winning draws) -log(u) is the series of
// -log(1 - t) in the exact t = 1 - u.
dsl::Expr<dsl::f32> gumbel_score(dsl::Expr<dsl::f32> value, dsl::Expr<dsl::f32> best, dsl::Expr<dsl::f32> inverse_temperature,
                                 dsl::Expr<dsl::u32> id, dsl::Expr<dsl::u32> counter, dsl::Expr<dsl::u32> seed_low,
                                 dsl::Expr<dsl::u32> seed_high);

// With advance_context: the step state (read-write) and the generated tokens (write), declared.
std::pair<std::optional<dsl::Buffer<dsl::u32>>, std::optional<dsl::Buffer<dsl::u32>>> declare_advance(dsl::KernelBuilder& kb,
                                                                                                    uint32_t advance_context);
// The step state moves on to `chosen` (ops/common/step_state.h), by one invocation.
void advance_step(const dsl::Buffer<dsl::u32>& step, const dsl::Buffer<dsl::u32>& generated, uint32_t advance_context,
                  dsl::Expr<dsl::u32> chosen);

}  // namespace bdsl::ops
