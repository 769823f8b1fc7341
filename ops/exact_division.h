// n / d rounded to nearest even, bit for bit what a CPU's IEEE division gives, on any Vulkan
// device. Vulkan lets `/` be off by 2.5 ulp (NVIDIA's is), but the activation scale 127 / absmax
// must be the CPU's exactly so that q, and with it every int32 accumulator, is the same everywhere.
//
// How: the device's `/` gives an estimate; the true quotient's significand R is within a few units
// of it, and exact integer products of the candidates' midpoints with d's significand (48-bit,
// in two 32-bit words) say which one it is. Eight independent tests instead of a 25-step long
// division: a dependent chain of ~25 operations instead of ~110 (on an H100 the long division
// cost ~0.3 us on the critical path of every projection's norm prologue). Where the estimate is
// further off than the window (a device worse than the spec), a uniform branch falls back to the
// long division, so the answer is exact whatever the estimate.
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
