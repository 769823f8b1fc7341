// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a
// counter-based generator, so every draw is a pure function of (key, counter) and any invocation
// can make its own with no state, and a host twin (models/sampler.h) gets the same 32 bits.
// Internal to ops/.
#pragma once
#include <cstdint>

#include "dsl/dsl.h"

namespace bdsl::ops {

// The first word of Philox4x32-10 at counter (c0, c1, 0, 0) under key (k0, k1).
dsl::Expr<dsl::u32> philox_first_word(dsl::Expr<dsl::u32> c0, dsl::Expr<dsl::u32> c1, dsl::Expr<dsl::u32> k0,
                                      dsl::Expr<dsl::u32> k1);
// A draw in (0, 1) from its top 24 bits: ((bits >> 8) + 0.5) / 2^24, exact in f32 (never 0 or 1).
dsl::Expr<dsl::f32> open_unit_interval(dsl::Expr<dsl::u32> bits);

}  // namespace bdsl::ops
