#include "ops/common/norm_scale.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

// The f32 `units` places above x (below for negative units): x's neighbours for positive normal x.
Expr<f32> step_units(const Expr<f32>& x, const Expr<i32>& units) {
  return bitcast<f32>(bitcast<u32>(x) + bitcast<u32>(units));
}

// Two rounds of the midpoint test: a first guess up to two units off still ends correctly rounded.
constexpr int kRounds = 2;

// The f32 nearest to the value a pair of tests places: below(lo) says the value lies below the
// midpoint lo (exact in f64) between a guess and its lower neighbour, above(hi) that it lies above
// the upper one. Neither: the guess is the nearest (the value is never on a midpoint, see callers).
template <class Below, class Above>
Expr<f32> nearest(Expr<f32> guess, const char* name, Below below, Above above) {
  for (int round = 0; round < kRounds; ++round) {
    auto up = let(std::string(name) + "_up", step_units(guess, 1));
    auto down = let(std::string(name) + "_down", step_units(guess, -1));
    auto hi = let(std::string(name) + "_hi", (cast<f64>(guess) + cast<f64>(up)) * 0.5);
    auto lo = let(std::string(name) + "_lo", (cast<f64>(down) + cast<f64>(guess)) * 0.5);
    guess = let(name, select(above(hi), up, select(below(lo), down, guess)));
  }
  return guess;
}

}  // namespace

Expr<f64> add_square(const Expr<f64>& acc, const Expr<f32>& x) {
  // The f32 product, then the widening: no contraction can reach across the conversion.
  return acc + cast<f64>(x * x);
}

// sqrt(t) lies above midpoint m iff t > m * m: m has 25 significant bits, so m * m (50) is exact in
// f64. A square root of an f32 is never on a midpoint (m * m has more bits than t).
Expr<f32> sqrt_correctly_rounded(const Expr<f32>& t, const Expr<i32>& guess_offset) {
  auto wide = let("sqrt_t", cast<f64>(t));
  auto guess = let("sqrt_guess", step_units(cast<f32>(sqrt(wide)), guess_offset));
  return nearest(
      guess, "sqrt_rn", [&](Expr<f64> lo) { return wide < lo * lo; }, [&](Expr<f64> hi) { return wide > hi * hi; });
}

// 1 / r lies above midpoint m iff m * r < 1 (r > 0): 25 + 24 significant bits, exact in f64. Never on
// a midpoint (m * r = 1 would need both to be powers of two, and a midpoint is not one).
Expr<f32> reciprocal_correctly_rounded(const Expr<f32>& r, const Expr<i32>& guess_offset) {
  auto wide = let("recip_r", cast<f64>(r));
  auto guess = let("recip_guess", step_units(cast<f32>(constant<f64>(1.0) / wide), guess_offset));
  return nearest(
      guess, "recip_rn", [&](Expr<f64> lo) { return lo * wide > 1.0; }, [&](Expr<f64> hi) { return hi * wide < 1.0; });
}

Expr<f32> rms_inverse_exact(const Expr<f64>& sum, uint32_t n, const Expr<f32>& eps) {
  // ggml: float mean = sum / n (a double division, then rounded to f32).
  auto mean = let("mean", cast<f32>(sum / constant<f64>(double(n))));
  auto t = let("mean_eps", mean + eps);
  return reciprocal_correctly_rounded(sqrt_correctly_rounded(t, constant<i32>(0)), constant<i32>(0));
}

}  // namespace bdsl::ops
