// The NeoX RoPE rotation shared by rope_kv_write and the QKV projection that rotates in its
// epilogue (ternary_matvec_qkv_rope): cos and sin of pos * base^(-2i/head_dim), accurate at large
// positions (see rope_kv_write.h). Emits DSL code; not an op.
#pragma once
#include <cstdint>

#include <bit>
#include <numbers>

#include "dsl/dsl.h"

namespace bdsl::ops::rope {

using namespace bdsl::dsl;

// A float pair (hi, lo) standing for hi + lo: about 44 significant bits from f32 arithmetic.
// Exact products come from Dekker's splitting into 12-bit halves by masking the mantissa (a
// product of 12-bit halves is exact whether or not a driver fuses it into an fma; lavapipe's fma
// is not fused, so fma residuals are no help). The optimisers (spirv-opt, Mesa, drivers) may
// rewrite float algebra that is not `precise`, which the DSL cannot say yet: seen on lavapipe,
// Dekker's residual folded to 0. So every value whose rounding matters passes through opaque():
// its bits OR a zero read from the step-state buffer, which no optimiser can see through.
struct Wide {
  Expr<f32> hi, lo;
};

class Exact {
 public:
  explicit Exact(Expr<u32> zero) : zero_(zero) {}
  Expr<f32> opaque(Expr<f32> x) const { return bitcast<f32>(bitcast<u32>(x) | zero_); }

  Wide split12(Expr<f32> x) const {
    auto hi = opaque(bitcast<f32>(bitcast<u32>(x) & 0xfffff000u));
    return {hi, opaque(x - hi)};
  }
  // a * b = p + e exactly.
  Wide product(Expr<f32> a, Expr<f32> b) const {
    const Wide sa = split12(a), sb = split12(b);
    auto p = opaque(a * b);
    auto e1 = opaque(sa.hi * sb.hi - p);
    auto e2 = opaque(e1 + sa.hi * sb.lo);
    auto e3 = opaque(e2 + sa.lo * sb.hi);
    return {p, opaque(e3 + sa.lo * sb.lo)};
  }
  Wide mul(const Wide& a, const Wide& b) const {
    const Wide p = product(a.hi, b.hi);
    return {p.hi, opaque(p.lo + opaque(a.hi * b.lo + a.lo * b.hi))};
  }
  Wide sqrt_(const Wide& a) const {  // one Newton step on the f32 square root
    auto s = opaque(sqrt(a.hi));
    const Wide sq = product(s, s);
    auto residual = opaque(opaque(opaque(a.hi - sq.hi) - sq.lo) + a.lo);
    return {s, opaque(residual / (2.0f * s))};
  }

 private:
  Expr<u32> zero_;
};

// base^(-2i/head_dim) in wide precision when head_dim is a power of two: 2i/head_dim is then a
// binary fraction, and the power a product of (1/base)^(2^-k) from repeated square roots. Any
// other head_dim takes exp2 in f32 (a few ulp of the frequency).
inline Wide frequency(const Exact& x, Expr<u32> i, Expr<f32> base, uint32_t head_dim) {
  const uint32_t half = head_dim / 2;
  if ((half & (half - 1)) != 0) {
    const float log2e = static_cast<float>(std::numbers::log2e);
    return {exp2(cast<f32>(i) * (-2.0f / static_cast<float>(head_dim)) * (log(base) * log2e)), constant<f32>(0.0f)};
  }
  auto inv = x.opaque(1.0f / base);
  const Wide one = x.product(inv, base);
  Wide root{inv, x.opaque(inv * x.opaque(x.opaque(1.0f - one.hi) - one.lo))};  // (1/base)^(2^-k), k = 0
  Wide acc{constant<f32>(1.0f), constant<f32>(0.0f)};
  for (uint32_t bit = half >> 1; bit > 0; bit >>= 1) {
    root = x.sqrt_(root);
    root = {let("root_hi", root.hi), let("root_lo", root.lo)};
    const Wide product = x.mul(acc, root);
    auto take = (i & bit) != 0u;
    acc = {let("freq_hi", select(take, product.hi, acc.hi)), let("freq_lo", select(take, product.lo, acc.lo))};
  }
  return acc;
}

// cos and sin of pos * base^(-2i/head_dim) for pair index i. The angle is carried in two parts
// and reduced to [-pi, pi] by 2*pi in three parts (the first two of 12 bits, so that turns * part
// is exact for angles below 2^12 turns, i.e. positions below ~25000); sin and cos only ever see a
// small argument accurate to ~1e-7.
inline Expr<vec2> rotation(const Exact& x, Expr<f32> pos, Expr<u32> i, Expr<f32> base, uint32_t head_dim) {
  constexpr double two_pi = 2.0 * std::numbers::pi;
  const auto twelve_bits = [](double v) {
    return std::bit_cast<float>(std::bit_cast<uint32_t>(static_cast<float>(v)) & 0xfffff000u);
  };
  const float c1 = twelve_bits(two_pi), c2 = twelve_bits(two_pi - c1);
  const float c3 = static_cast<float>(two_pi - c1 - c2);
  const Wide freq = frequency(x, i, base, head_dim);
  const Wide theta = x.product(pos, freq.hi);
  auto theta_lo = x.opaque(theta.lo + x.opaque(pos * freq.lo));
  auto turns = let("turns", round(theta.hi * static_cast<float>(1.0 / two_pi)));
  auto r1 = x.opaque(theta.hi - x.opaque(turns * c1));
  auto r2 = x.opaque(r1 - x.opaque(turns * c2));
  auto r = let("angle", x.opaque(x.opaque(r2 + theta_lo) - turns * c3));
  return make_vec<f32>(cos(r), sin(r));
}

// (x0, x1) turned by (c, s): (x0 c - x1 s, x0 s + x1 c).
inline Expr<vec2> rotate(Expr<f32> x0, Expr<f32> x1, Expr<vec2> cs) {
  return make_vec<f32>(x0 * cs.x() - x1 * cs.y(), x0 * cs.y() + x1 * cs.x());
}

}  // namespace bdsl::ops::rope
