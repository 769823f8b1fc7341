#include "ops/common/exact_division.h"

namespace bdsl::ops {
using namespace dsl;

namespace {

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
  // The residual of c's upper midpoint, x * 2^24 - (2c + 1) * dm: both products are below 2^50,
  // but the residual is small, so their low 32 bits (wrapping multiply and subtract) give it
  // exactly as an int32 wherever |residual| < 2^31. Its f32 approximation (each product off by
  // at most 2^25) says whether that holds: below 2^28, the true one is below 2^29.
  auto m = let("div_mid", c * 2u + 1u);
  auto res = let("div_res", bitcast<i32>((s.x << 24u) - m * s.dm));
  auto res_f = let("div_res_f", cast<f32>(s.x) * 16777216.0f - cast<f32>(m) * cast<f32>(s.dm));
  // In units of the result's last place the quotient is c + 1/2 + res / t (t = 2 dm, exact in
  // f32), so R = c + 1 + floor(res / t) (a quotient of two floats is never exactly halfway: no
  // ties). The floor from an f32 division, corrected by one step against the exact remainder.
  auto t = let("div_t", bitcast<i32>(s.dm * 2u));
  auto q0 = let("div_q0", cast<i32>(floor(cast<f32>(res) / cast<f32>(t))));
  auto r0 = let("div_r0", res - q0 * t);
  auto q1 = let("div_q1", q0 + select(r0 < 0, constant<i32>(-1), select(r0 >= t, constant<i32>(1), constant<i32>(0))));
  auto rounded = let("div_rounded", bitcast<u32>(bitcast<i32>(c) + 1 + q1));
  // Off by more than the residual's range (a device worse than the spec): the long division.
  auto valid = let("div_valid", near && abs(res_f) < 268435456.0f);
  auto result = k.var<f32>("div_result", assemble(s.biased, rounded));
  if_(!valid, [&] { result = divide_by_long_division(n, d); });
  return Expr<f32>(result);
}

}  // namespace bdsl::ops
