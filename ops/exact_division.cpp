#include "ops/exact_division.h"

namespace bdsl::ops {
using namespace dsl;

namespace {

constexpr int kWindow = 4;  // candidates c - 4 .. c + 3 are tested: the estimate may be 3 units off

struct Significands {
  Expr<u32> nb, db, x, dm, shifted, biased;  // x / dm lies in [1, 2); biased: the result's exponent field
};

Significands significands(const Expr<f32>& n, const Expr<f32>& d) {
  auto nb = let("div_n_bits", bitcast<u32>(n));
  auto db = let("div_d_bits", bitcast<u32>(d));
  auto nm = let("div_n_sig", (nb & 0x7fffffu) | 0x800000u);
  auto dm = let("div_d_sig", (db & 0x7fffffu) | 0x800000u);
  auto shifted = let("div_shift", select(nm < dm, 1u, 0u));
  auto biased = let("div_exp", ((nb >> 23u) + 127u) - (db >> 23u) - shifted);
  return {nb, db, let("div_x", nm << shifted), dm, shifted, biased};
}

// The float with exponent field `biased` and significand `rounded` (2^23 .. 2^24: a carry out
// of the significand correctly bumps the exponent).
Expr<f32> assemble(const Expr<u32>& biased, const Expr<u32>& rounded) {
  return bitcast<f32>((biased << 23u) + (rounded - 0x800000u));
}

}  // namespace

Expr<f32> divide_by_long_division(const Expr<f32>& n, const Expr<f32>& d) {
  const Significands s = significands(n, d);
  // 25 quotient bits, unrolled (straight-line code: no loop overhead on the critical path).
  Expr<u32> num = s.x;
  Expr<u32> q = constant<u32>(0u);
  for (int step = 0; step < 25; ++step) {
    auto bit = let("div_bit", select(num >= s.dm, 1u, 0u));
    q = let("div_quot", (q << 1u) | bit);
    num = let("div_rem", (num - s.dm * bit) << 1u);
  }
  auto mant = let("div_mant", q >> 1u);  // 24 bits, leading one at bit 23
  auto round_up = (q & 1u) == 1u && (num != 0u || (mant & 1u) == 1u);
  return assemble(s.biased, let("div_rounded", mant + select(round_up, 1u, 0u)));
}

Expr<f32> divide_correctly_rounded(KernelBuilder& k, const Expr<f32>& n, const Expr<f32>& d) {
  return divide_correctly_rounded(k, n, d, n / d);
}

Expr<f32> divide_correctly_rounded(KernelBuilder& k, const Expr<f32>& n, const Expr<f32>& d,
                                   const Expr<f32>& estimate) {
  const Significands s = significands(n, d);
  // The estimate's significand at the result's exponent: c, within a few units of R.
  auto eb = let("div_est_bits", bitcast<u32>(estimate));
  auto est_exp = let("div_est_exp", eb >> 23u);
  auto est_sig = let("div_est_sig", (eb & 0x7fffffu) | 0x800000u);
  auto c = let("div_c", select(est_exp == s.biased, est_sig,
                               select(est_exp == s.biased + 1u, est_sig << 1u, est_sig >> 1u)));
  auto near = est_exp + 1u >= s.biased && est_exp <= s.biased + 1u;
  // R rounds up past candidate v when the quotient lies above v's upper midpoint:
  // x * 2^24 > (2v + 1) * dm, or on it (a tie) with v odd. Both sides are exact 64-bit integers:
  // (2v + 1) < 2^26 and dm < 2^24 as 16-bit limbs; x * 2^24 as (x >> 8, x << 24).
  auto target_hi = let("div_t_hi", s.x >> 8u);
  auto target_lo = let("div_t_lo", s.x << 24u);
  auto d0 = let("div_d0", s.dm & 0xffffu);
  auto d1 = let("div_d1", s.dm >> 16u);
  std::vector<Expr<boolean>> up;
  for (int i = -kWindow; i < kWindow; ++i) {
    auto v = i < 0 ? c - static_cast<uint32_t>(-i) : c + static_cast<uint32_t>(i);
    auto a = let("div_mid", v * 2u + 1u);
    auto a0 = a & 0xffffu;
    auto a1 = a >> 16u;
    auto lo0 = let("div_lo0", a0 * d0);
    auto mid = let("div_mid_sum", a0 * d1 + a1 * d0);
    auto lo = let("div_lo", lo0 + (mid << 16u));
    auto hi = let("div_hi", a1 * d1 + (mid >> 16u) + select(lo < lo0, 1u, 0u));
    auto below = hi < target_hi || (hi == target_hi && lo < target_lo);
    auto tie = hi == target_hi && lo == target_lo;
    up.push_back(let("div_up", below || (tie && (v & 1u) == 1u)));
  }
  Expr<u32> count = constant<u32>(0u);
  for (const auto& u : up) count = count + select(u, 1u, 0u);
  // In the window only if the first test rounds up and the last does not.
  auto valid = let("div_valid", near && up.front() && !up.back());
  auto result = k.var<f32>("div_result", assemble(s.biased, c - static_cast<uint32_t>(kWindow) + count));
  if_(!valid, [&] { result = divide_by_long_division(n, d); });
  return Expr<f32>(result);
}

}  // namespace bdsl::ops
