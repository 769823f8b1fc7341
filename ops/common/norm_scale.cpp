#include "ops/common/norm_scale.h"

#include <stdexcept>
#include <string>

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

// The f32 `units` places above x (below for negative units): x's neighbours for positive normal x.
Expr<f32> step_units(const Expr<f32>& x, const Expr<i32>& units) {
  return bitcast<f32>(bitcast<u32>(x) + bitcast<u32>(units));
}

// The f32 nearest to a value v that a pair of exact tests places against the midpoints (exact in
// f64) on either side of a guess: below(lo) says v < lo, above(hi) v > hi. Each round moves the guess
// a unit; `rounds` of them correct a first guess that many units off. tie(m): v == m exactly,
// where that can happen (then the even neighbour wins, as round to nearest even); v is never on
// a midpoint otherwise (see the callers).
template <class Below, class Above, class Tie>
Expr<f32> nearest(Expr<f32> guess, const char* name, int rounds, Below below, Above above, Tie tie) {
  for (int round = 0; round < rounds; ++round) {
    auto up = let(std::string(name) + "_up", step_units(guess, 1));
    auto down = let(std::string(name) + "_down", step_units(guess, -1));
    auto hi = let(std::string(name) + "_hi", (cast<f64>(guess) + cast<f64>(up)) * 0.5);
    auto lo = let(std::string(name) + "_lo", (cast<f64>(down) + cast<f64>(guess)) * 0.5);
    auto odd = let(std::string(name) + "_odd", (bitcast<u32>(guess) & 1u) == 1u);
    guess = let(name, select(above(hi) || (tie(hi) && odd), up, select(below(lo) || (tie(lo) && odd), down, guess)));
  }
  return guess;
}

// The device's f32 sqrt and division may be a few units off (Vulkan asks no better); three rounds.
constexpr int kRounds = 3;

}  // namespace

OpTarget with_exact_norm_scale(OpTarget target, bool exact) {
  if (exact && !target.float64)
    throw std::invalid_argument("the exact RMSNorm scale needs a device with f64 (shaderFloat64); '" + target.device_name +
                                "' has none");
  target.exact_norm_scale = exact;
  return target;
}

Expr<f64> add_square(const Expr<f64>& acc, const Expr<f32>& x) {
  // The f32 product, then the widening: no contraction can reach across the conversion.
  return acc + cast<f64>(x * x);
}

// sqrt(t) lies above midpoint m iff t > m * m: m has 25 significant bits, so m * m (50) is exact in
// f64. A square root of an f32 is never on a midpoint (m * m has more bits than t).
Expr<f32> sqrt_correctly_rounded(const Expr<f32>& t, const Expr<i32>& guess_offset) {
  auto wide = let("sqrt_t", cast<f64>(t));
  auto guess = let("sqrt_guess", step_units(sqrt(t), guess_offset));  // f32: f64's sqrt is slow on NVIDIA
  auto never = [](Expr<f64>) { return constant<boolean>(false); };
  return nearest(
      guess, "sqrt_rn", kRounds, [&](Expr<f64> lo) { return wide < lo * lo; }, [&](Expr<f64> hi) { return wide > hi * hi; },
      never);
}

// 1 / r lies above midpoint m iff m * r < 1 (r > 0): 25 + 24 significant bits, exact in f64. Never on
// a midpoint (m * r = 1 would need both to be powers of two, and a midpoint is not one).
Expr<f32> reciprocal_correctly_rounded(const Expr<f32>& r, const Expr<i32>& guess_offset) {
  auto wide = let("recip_r", cast<f64>(r));
  auto guess = let("recip_guess", step_units(1.0f / r, guess_offset));  // f32: f64's division is slow on NVIDIA
  auto never = [](Expr<f64>) { return constant<boolean>(false); };
  return nearest(
      guess, "recip_rn", kRounds, [&](Expr<f64> lo) { return lo * wide > 1.0; }, [&](Expr<f64> hi) { return hi * wide < 1.0; },
      never);
}

// sum / n against midpoint m: m * n has at most 25 + 14 significant bits (n < 2^14), exact in f64, so
// sum < m * n decides exactly, and sum == m * n is a tie (the f32 of a double that is a midpoint).
Expr<f32> mean_correctly_rounded(const Expr<f64>& sum, uint32_t n, const Expr<i32>& guess_offset) {
  if (n == 0 || n >= (1u << 14)) throw std::invalid_argument("mean_correctly_rounded: n must be 1 to 16383");
  const double wn = double(n);
  auto guess = let("mean_guess", step_units(cast<f32>(sum * constant<f64>(1.0 / wn)), guess_offset));
  return nearest(
      guess, "mean_rn", 2, [&](Expr<f64> lo) { return sum < lo * wn; }, [&](Expr<f64> hi) { return sum > hi * wn; },
      [&](Expr<f64> m) { return sum == m * wn; });
}

Expr<f32> rms_inverse_exact(const Expr<f64>& sum, uint32_t n, const Expr<f32>& eps) {
  // ggml: float mean = sum / n (a double division, then rounded to f32).
  auto mean = let("mean", mean_correctly_rounded(sum, n, constant<i32>(0)));
  auto t = let("mean_eps", mean + eps);
  return reciprocal_correctly_rounded(sqrt_correctly_rounded(t, constant<i32>(0)), constant<i32>(0));
}

}  // namespace bdsl::ops
