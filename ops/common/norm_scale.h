// RMSNorm's scale 1 / sqrt(mean(x^2) + eps) as bitnet.cpp's ggml computes it on the CPU: each
// square rounded to f32, the squares summed in double, mean = (float)(sum / n), then
// 1.0f / sqrtf(mean + eps), every step correctly rounded. A sum of squares in f32 gives another
// mean in almost every row (96% of random rows, an ulp or more), which moves x * scale by an ulp
// and so, now and then, an int8 activation across a rounding half: then the int32 accumulators
// are no longer bitnet.cpp's, and a prompt's prefill (one summation order) and its decode
// (another) no longer agree with each other either.
//
// How, on any Vulkan device:
// - Each invocation keeps its squares' sum as an unevaluated pair hi + lo (Knuth's two-sum, under
//   `precise`, so no compiler contracts or reassociates it); the workgroup combines the pairs
//   over subgroup shuffles and shared memory. The pair holds the sum to ~1e-13 relative, well
//   within what decides the f32 mean, in any order: every kernel gets the same mean whatever its
//   workgroup (but for a mean within ~1e-13 of a rounding half, a few in ten million rows).
// - mean: the pair as a 64-bit integer over its exponent, divided by n in integers and rounded
//   to nearest even with the remainder as sticky bit.
// - sqrt: the integer square root of the significand (the device's sqrt as first guess,
//   corrected against exact 64-bit squares), rounded by the exact midpoint test.
// - 1 / sqrt: divide_correctly_rounded (ops/common/exact_division.h).
// The device may flush subnormal squares (|x| < 1.1e-19) to zero; a row whose mean is below
// 2^-60 gets the device's plain mean, which eps (>= 2^-30) then absorbs exactly.
#pragma once
#include <cstdint>
#include <string>

#include "dsl/dsl.h"

namespace bdsl::ops {

// A sum kept as hi + lo.
struct SquareSum {
  dsl::Expr<dsl::f32> hi, lo;
};

// The sum of nothing.
SquareSum empty_square_sum();
// acc + x * x, the square rounded to f32 first (as ggml's (double)(x * x)).
SquareSum add_square(const SquareSum& acc, const dsl::Expr<dsl::f32>& x);
// a + b.
SquareSum add_sums(const SquareSum& a, const SquareSum& b);

// The workgroup's sum of every invocation's `part`; every invocation gets the same pair. Needs
// two f32 elements of shared memory per subgroup in `scratch`: as many as the workgroup has
// invocations holds them for subgroups of two lanes or more (every Vulkan implementation we know
// runs 4 to 128). One barrier. Every invocation of the workgroup must call it.
SquareSum workgroup_square_sum(dsl::KernelBuilder& k, const dsl::Shared<dsl::f32>& scratch, const SquareSum& part);

// 1 / sqrt(sum / n + eps) as ggml's rms_norm (see above), from the whole row's sum of squares.
dsl::Expr<dsl::f32> rms_inverse(dsl::KernelBuilder& k, const SquareSum& sum, uint32_t n, const dsl::Expr<dsl::f32>& eps);

// The building blocks, for tests: float(sum / n) correctly rounded, and sqrt(t) correctly
// rounded for t positive and normal.
dsl::Expr<dsl::f32> mean_of_square_sum(dsl::KernelBuilder& k, const SquareSum& sum, uint32_t n);
dsl::Expr<dsl::f32> sqrt_correctly_rounded(const dsl::Expr<dsl::f32>& t);
// The same with the device's first guess moved by `estimate_offset` units (tests reach every
// correction with it on devices whose sqrt is exact).
dsl::Expr<dsl::f32> sqrt_correctly_rounded(const dsl::Expr<dsl::f32>& t, const dsl::Expr<dsl::i32>& estimate_offset);

}  // namespace bdsl::ops
