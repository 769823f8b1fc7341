// n / d rounded to nearest even, bit for bit what a CPU's IEEE division gives, on any Vulkan
// device. Vulkan lets `/` be off by 2.5 ulp (NVIDIA's is), but the activation scale 127 / absmax
// must be the CPU's exactly so that q, and with it every int32 accumulator, is the same everywhere.
//
// How: the device's `/` gives an estimate c of the result's significand R. The residual of c's
// upper midpoint, x * 2^24 - (2c + 1) * dm (x / dm the significands' quotient), is an exact
// int32 from wrapping 32-bit products wherever it is small, which an f32 approximation of it
// checks; R is then c + 1 + floor(residual / 2dm) (division has no ties). ~20 operations, mostly
// independent (the eight-candidate test before it cost ~100 us a token over the 120 norm
// prologues, bench/RESULTS.md run 8). Where the estimate is further off than the residual's
// range (~8 units; a device worse than the spec), a uniform branch falls back to the long
// division, so the answer is exact whatever the estimate.
//
// Preconditions: n and d positive and normal, quotient normal (127 / max(absmax, 1e-5) is).
#pragma once
#include "dsl/dsl.h"

namespace bdsl::ops {

dsl::Expr<dsl::f32> divide_correctly_rounded(dsl::KernelBuilder& k, const dsl::Expr<dsl::f32>& n,
                                             const dsl::Expr<dsl::f32>& d);
// The same with the estimate given (tests pass deliberately wrong ones to reach every path).
dsl::Expr<dsl::f32> divide_correctly_rounded(dsl::KernelBuilder& k, const dsl::Expr<dsl::f32>& n,
                                             const dsl::Expr<dsl::f32>& d, const dsl::Expr<dsl::f32>& estimate);
// Integer long division only (25 quotient bits, remainder as sticky bit): the fallback.
dsl::Expr<dsl::f32> divide_by_long_division(const dsl::Expr<dsl::f32>& n, const dsl::Expr<dsl::f32>& d);

}  // namespace bdsl::ops
