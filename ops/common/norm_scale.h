// RMSNorm's scale 1 / sqrt(mean(x^2) + eps) at bitnet.cpp's rounding points. ggml's rms_norm
// rounds each square to f32, sums the squares in double, rounds the mean to f32
// (`float mean = sum / n`) and takes `1.0f / sqrtf(mean + eps)`, each step correctly rounded.
// A sum of squares in f32 gives another mean in almost every row (an ulp or more), and the
// device's sqrt and division are not correctly rounded: x * scale then moves by an ulp, which
// now and then carries an int8 activation across a rounding half, so the int32 accumulators
// part from bitnet.cpp's, and a prompt's prefill (one summation order) from its decode (another).
//
// Asked for (OpTarget::exact_norm_scale, ModelOptions::exact_norm_scale, `--exact-norm`) on a
// device with f64, the kernels follow ggml:
// - each square x * x is rounded to f32, widened, and summed in f64 (each kernel in its own
//   order: a double sum of 2560 or 6912 such squares is within ~2^-40 of the exact one, so the f32
//   mean is ggml's but for a sum within that of a rounding half, about one row in 2^17);
// - mean = f32(sum * (1 / n)), t = mean + eps in f32;
// - the mean, sqrt(t) and 1 / sqrt(t) start from a fast guess (sum * (1 / n) in f64, the device's
//   f32 sqrt and division) and are corrected to the correctly rounded f32 by exact tests against
//   the midpoints around the guess (their squares and products are exact in f64): no f64 division
//   or sqrt, which are slow on NVIDIA, and nothing depends on how well the device computes them.
//   The tests are independent of each other (one step deep, not a round per unit), and where the
//   subgroup allows, each lane runs one of them and the subgroup counts them (the value is the
//   same in every lane): f64 throughput is scarce, and every invocation of a workgroup needs the scale.
// Otherwise (the default) the sum, sqrt and division stay in f32: another scale in most rows, by an
// ulp or a few. Why that is the default: every projection's norm prologue waits on the exact
// scale, and on the H100 it makes single-stream decode 5-6% slower (bench/RESULTS.md run 35; 10%
// with the corrections in rounds in every invocation, run 34); on GPUs whose f64 runs at 1/32 or
// 1/64 of f32 (most consumer parts) the sum's f64 adds would cost far more.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "dsl/dsl.h"
#include "ops/target.h"

namespace bdsl::ops {

// How kernels for `target` compute the scale: in f32 (the default), or ggml's (asked for, and f64
// on the device), its corrections' tests spread over a subgroup's lanes where every subgroup has
// at least kNormScaleLanes of them (a fixed size), else each invocation running them all.
enum class NormScaleMode { F32, Exact, ExactOverLanes };
inline constexpr uint32_t kNormScaleLanes = 8;
NormScaleMode norm_scale_mode(const OpTarget& target);
// The same for a workgroup of `workgroup` invocations: over lanes only where each of its subgroups
// has its first kNormScaleLanes lanes (a last, partial subgroup may not).
NormScaleMode norm_scale_mode(const OpTarget& target, uint32_t workgroup);
inline bool norm_scale_exact(const OpTarget& target) { return norm_scale_mode(target) != NormScaleMode::F32; }

// `target` with the exact scale asked for or not; asked for on a device without f64, throws
// std::invalid_argument naming the device (the kernels would quietly keep the f32 scale).
OpTarget with_exact_norm_scale(OpTarget target, bool exact);

// The f64 sum of the squares of `xs`, each square rounded to f32 before it is widened (as ggml's
// (double)(x * x)), added as a balanced tree: a chain of n dependent f64 adds costs n times their
// latency (~14 cycles on the H100), a tree log2(n) times.
dsl::Expr<dsl::f64> sum_of_squares(const std::vector<dsl::Expr<dsl::f32>>& xs);

// One row's sum of squares for its scale, as an invocation adds its elements (each an element of
// the row, or 0 past its end, in the invocation's own order: the order is the sum's bits). In f32
// (NormScaleMode::F32) a chain of the squares in that order; for ggml's scale each square rounded
// to f32 and the squares summed in f64 as a tree (sum_of_squares).
class SquareSum {
 public:
  explicit SquareSum(NormScaleMode mode) : mode_(mode) {}
  void add(const dsl::Expr<dsl::f32>& x);

  // 1 / sqrt(sum / n + eps[t]) for each row t of n elements, once every invocation of the
  // workgroup (`workgroup` invocations) has added its elements to sums[t] (all in one mode): the
  // sums reduced over the workgroup behind one barrier, in subgroup order; in f32, or at ggml's
  // rounding points (rms_inverse_exact). The same value in every invocation.
  friend std::vector<dsl::Expr<dsl::f32>> rms_inverses(dsl::KernelBuilder& k, uint32_t workgroup, uint32_t n,
                                                       const std::vector<SquareSum>& sums,
                                                       const std::vector<dsl::Expr<dsl::f32>>& eps);

 private:
  NormScaleMode mode_;
  std::optional<dsl::Expr<dsl::f32>> chain_;  // F32
  std::vector<dsl::Expr<dsl::f32>> squared_;  // the exact modes: the elements whose squares the tree adds
};
std::vector<dsl::Expr<dsl::f32>> rms_inverses(dsl::KernelBuilder& k, uint32_t workgroup, uint32_t n,
                                              const std::vector<SquareSum>& sums, const std::vector<dsl::Expr<dsl::f32>>& eps);

// 1.0f / sqrtf(f32(sum * (1 / n)) + eps), every step correctly rounded (see above). `lane`: the
// invocation's lane (NormScaleMode::ExactOverLanes; sum and eps the same in every lane of the
// subgroup, every lane active), else none.
dsl::Expr<dsl::f32> rms_inverse_exact(const dsl::Expr<dsl::f64>& sum, uint32_t n, const dsl::Expr<dsl::f32>& eps,
                                      const std::optional<dsl::Expr<dsl::u32>>& lane);
// The lane rms_inverse_exact takes for `mode` in kernel k.
std::optional<dsl::Expr<dsl::u32>> norm_scale_lane(dsl::KernelBuilder& k, NormScaleMode mode);

// The building blocks, for tests: sqrt(t) and 1 / r correctly rounded for positive normal t and r,
// from a first guess moved by `guess_offset` units in the last place (0 in the kernels; tests
// reach every correction with it on devices whose f64 is exact); `lane` as above.
dsl::Expr<dsl::f32> sqrt_correctly_rounded(const dsl::Expr<dsl::f32>& t, const dsl::Expr<dsl::i32>& guess_offset,
                                           const std::optional<dsl::Expr<dsl::u32>>& lane = std::nullopt);
dsl::Expr<dsl::f32> reciprocal_correctly_rounded(const dsl::Expr<dsl::f32>& r, const dsl::Expr<dsl::i32>& guess_offset,
                                                 const std::optional<dsl::Expr<dsl::u32>>& lane = std::nullopt);
// f32(sum / n) as a correctly rounded division in double then rounded to f32 (ggml's mean), for
// n < 2^14 and a positive normal quotient.
dsl::Expr<dsl::f32> mean_correctly_rounded(const dsl::Expr<dsl::f64>& sum, uint32_t n, const dsl::Expr<dsl::i32>& guess_offset,
                                           const std::optional<dsl::Expr<dsl::u32>>& lane = std::nullopt);

}  // namespace bdsl::ops
