#include "ops/common/norm_scale.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ops/common/matrix_support.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

// The f32 `units` places above x (below for negative units): x's neighbours for positive normal x.
Expr<f32> step_units(const Expr<f32>& x, const Expr<i32>& units) {
  return bitcast<f32>(bitcast<u32>(x) + bitcast<u32>(units));
}

// The f32 nearest to a value v, from a first guess at most `reach` units off: v's place among the
// 2 * reach midpoints between the guess's neighbours guess - reach .. guess + reach, each decided
// by an exact test. above(m) says v > m; tie(m) says v == m exactly, where that can happen (then
// the even neighbour wins, as round to nearest even); v is never on a midpoint otherwise (see the
// callers). The answer is the guess moved by the count of midpoints below v, less reach. The tests
// do not depend on each other: with `lane`, lane j runs test j and the subgroup adds them up
// (kNormScaleLanes >= 2 * reach lanes, all active, the value the same in each); without, each
// invocation runs them all.
template <class Above, class Tie>
Expr<f32> nearest(Expr<f32> guess, const std::string& name, int reach, const std::optional<Expr<u32>>& lane, Above above,
                  Tie tie) {
  // 1 where v lies above the midpoint between guess + j and guess + j + 1 (or on it, and guess + j is odd).
  auto passes = [&](Expr<i32> j) {
    auto low = let(name + "_low", step_units(guess, j));
    auto high = let(name + "_high", step_units(guess, j + 1));
    auto mid = let(name + "_mid", (cast<f64>(low) + cast<f64>(high)) * 0.5);
    return select(above(mid) || (tie(mid) && (bitcast<u32>(low) & 1u) == 1u), constant<u32>(1u), constant<u32>(0u));
  };
  std::optional<Expr<u32>> below;
  if (lane) {
    auto j = let(name + "_j", bitcast<i32>(*lane) - reach);  // lanes past 2 * reach count nothing
    below = subgroup_add(select(*lane < uint32_t(2 * reach), passes(j), constant<u32>(0u)));
  } else {
    for (int j = -reach; j < reach; ++j) {
      auto p = passes(constant<i32>(j));
      below = below ? *below + p : p;
    }
  }
  return let(name, step_units(guess, bitcast<i32>(*below) - reach));
}

// The device's f32 sqrt and division may be a few units off (Vulkan asks no better): three either way.
constexpr int kReach = 3;
// sum * (1 / n) in f64 rounds to the f32 next to ggml's at worst; two either way lets the tests
// move the guess a unit.
constexpr int kMeanReach = 2;
static_assert(2 * kReach <= int(kNormScaleLanes) && 2 * kMeanReach <= int(kNormScaleLanes));

}  // namespace

OpTarget with_exact_norm_scale(OpTarget target, bool exact) {
  if (exact && !target.float64)
    throw std::invalid_argument("the exact RMSNorm scale needs a device with f64 (shaderFloat64); '" + target.device_name +
                                "' has none");
  target.exact_norm_scale = exact;
  return target;
}

NormScaleMode norm_scale_mode(const OpTarget& target) {
  if (!target.exact_norm_scale || !target.float64) return NormScaleMode::F32;
  return target.subgroup_size_fixed && target.subgroup_size >= kNormScaleLanes ? NormScaleMode::ExactOverLanes
                                                                               : NormScaleMode::Exact;
}

NormScaleMode norm_scale_mode(const OpTarget& target, uint32_t workgroup) {
  const NormScaleMode mode = norm_scale_mode(target);
  const uint32_t partial = workgroup % std::max(1u, target.subgroup_size);
  if (mode == NormScaleMode::ExactOverLanes && partial != 0 && partial < kNormScaleLanes) return NormScaleMode::Exact;
  return mode;
}

std::optional<Expr<u32>> norm_scale_lane(KernelBuilder& k, NormScaleMode mode) {
  if (mode == NormScaleMode::ExactOverLanes) return k.subgroup_invocation();
  return std::nullopt;
}

Expr<f64> sum_of_squares(const std::vector<Expr<f32>>& xs) {
  if (xs.empty()) return constant<f64>(0.0);
  // The f32 product, then the widening: no contraction can reach across the conversion.
  std::vector<Expr<f64>> level;
  for (const auto& x : xs) level.push_back(cast<f64>(x * x));
  while (level.size() > 1) {
    std::vector<Expr<f64>> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(level[i] + level[i + 1]);
    if (level.size() % 2) next.push_back(level.back());
    level = std::move(next);
  }
  return level[0];
}

void SquareSum::add(const Expr<f32>& x) {
  if (mode_ == NormScaleMode::F32)
    chain_ = chain_ ? *chain_ + x * x : x * x;
  else
    squared_.push_back(x);
}

std::vector<Expr<f32>> rms_inverses(KernelBuilder& k, uint32_t workgroup, uint32_t n, const std::vector<SquareSum>& sums,
                                    const std::vector<Expr<f32>>& eps) {
  if (sums.empty() || eps.size() != sums.size()) throw std::invalid_argument("rms_inverses: one eps a row, at least one row");
  const NormScaleMode mode = sums[0].mode_;
  for (const SquareSum& s : sums)
    if (s.mode_ != mode || (!s.chain_ && s.squared_.empty()))
      throw std::invalid_argument("rms_inverses: rows of one mode, each with elements");
  // The subgroups' partials are added in subgroup order from the first (a sum of squares is never
  // -0, so the same bits as adding them to 0.0).
  std::vector<Expr<f32>> inv;
  if (mode == NormScaleMode::F32) {
    std::vector<Expr<f32>> parts;
    for (const SquareSum& s : sums) parts.push_back(let("sum_sq", *s.chain_));
    const auto totals = workgroup_add_each<f32>(k, scratch_each<f32>(k, sums.size(), workgroup, "sum_sq_parts"), parts, "total_sq");
    for (size_t t = 0; t < sums.size(); ++t)
      inv.push_back(let("inv_rms", 1.0f / sqrt(totals[t] / static_cast<float>(n) + eps[t])));
    return inv;
  }
  std::vector<Expr<f64>> parts;
  for (const SquareSum& s : sums) parts.push_back(let("sum_sq", sum_of_squares(s.squared_)));
  // One f64 a subgroup in as many bytes as an f32 scratch: subgroups of two lanes or more (every
  // Vulkan implementation we know runs 4 to 128).
  const auto totals =
      workgroup_add_each<f64>(k, scratch_each<f64>(k, sums.size(), (workgroup + 1) / 2, "sum_sq_parts"), parts, "total_sq");
  const auto lane = norm_scale_lane(k, mode);
  for (size_t t = 0; t < sums.size(); ++t) inv.push_back(let("inv_rms", rms_inverse_exact(totals[t], n, eps[t], lane)));
  return inv;
}

// sqrt(t) lies above midpoint m iff t > m * m: m has 25 significant bits, so m * m (50) is exact in
// f64. A square root of an f32 is never on a midpoint (m * m has more bits than t).
Expr<f32> sqrt_correctly_rounded(const Expr<f32>& t, const Expr<i32>& guess_offset, const std::optional<Expr<u32>>& lane) {
  auto wide = let("sqrt_t", cast<f64>(t));
  auto guess = let("sqrt_guess", step_units(sqrt(t), guess_offset));  // f32: f64's sqrt is slow on NVIDIA
  auto never = [](Expr<f64>) { return constant<boolean>(false); };
  return nearest(guess, "sqrt_rn", kReach, lane, [&](Expr<f64> m) { return wide > m * m; }, never);
}

// 1 / r lies above midpoint m iff m * r < 1 (r > 0): 25 + 24 significant bits, exact in f64. Never on
// a midpoint (m * r = 1 would need both to be powers of two, and a midpoint is not one).
Expr<f32> reciprocal_correctly_rounded(const Expr<f32>& r, const Expr<i32>& guess_offset,
                                       const std::optional<Expr<u32>>& lane) {
  auto wide = let("recip_r", cast<f64>(r));
  auto guess = let("recip_guess", step_units(1.0f / r, guess_offset));  // f32: f64's division is slow on NVIDIA
  auto never = [](Expr<f64>) { return constant<boolean>(false); };
  return nearest(guess, "recip_rn", kReach, lane, [&](Expr<f64> m) { return m * wide < 1.0; }, never);
}

// sum / n against midpoint m: m * n has at most 25 + 14 significant bits (n < 2^14), exact in f64, so
// sum < m * n decides exactly, and sum == m * n is a tie (the f32 of a double that is a midpoint).
Expr<f32> mean_correctly_rounded(const Expr<f64>& sum, uint32_t n, const Expr<i32>& guess_offset,
                                 const std::optional<Expr<u32>>& lane) {
  if (n == 0 || n >= (1u << 14)) throw std::invalid_argument("mean_correctly_rounded: n must be 1 to 16383");
  const double wn = double(n);
  auto guess = let("mean_guess", step_units(cast<f32>(sum * constant<f64>(1.0 / wn)), guess_offset));
  return nearest(guess, "mean_rn", kMeanReach, lane, [&](Expr<f64> m) { return sum > m * wn; },
                 [&](Expr<f64> m) { return sum == m * wn; });
}

Expr<f32> rms_inverse_exact(const Expr<f64>& sum, uint32_t n, const Expr<f32>& eps, const std::optional<Expr<u32>>& lane) {
  // ggml: float mean = sum / n (a double division, then rounded to f32).
  auto mean = let("mean", mean_correctly_rounded(sum, n, constant<i32>(0), lane));
  auto t = let("mean_eps", mean + eps);
  return reciprocal_correctly_rounded(sqrt_correctly_rounded(t, constant<i32>(0), lane), constant<i32>(0), lane);
}

}  // namespace bdsl::ops
