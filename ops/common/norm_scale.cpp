#include "ops/common/norm_scale.h"

#include <bit>

#include "ops/common/exact_division.h"

namespace bdsl::ops {
using namespace dsl;

namespace {

// a + b = s + e exactly (Knuth's two-sum: any order of magnitudes, six operations).
SquareSum two_sum(const Expr<f32>& a, const Expr<f32>& b) {
  auto s = let_precise("ts_s", a + b);
  auto bb = let_precise("ts_b", s - a);
  auto e = let_precise("ts_e", (a - (s - bb)) + (b - bb));
  return {s, e};
}

// hi + lo renormalized so that hi = fl(hi + lo) (|hi| >= |lo|: three operations).
SquareSum fast_two_sum(const Expr<f32>& hi, const Expr<f32>& lo) {
  auto s = let_precise("fs_s", hi + lo);
  auto e = let_precise("fs_e", lo - (s - hi));
  return {s, e};
}

// 2^e as an f32, e + 127 in [1, 254] (a biased exponent field given as `biased`).
Expr<f32> power_of_two(const Expr<u32>& biased) { return bitcast<f32>(biased << 23u); }

}  // namespace

SquareSum empty_square_sum() { return {constant<f32>(0.0f), constant<f32>(0.0f)}; }

SquareSum add_square(const SquareSum& acc, const Expr<f32>& x) {
  auto sq = let_precise("sq", x * x);
  const SquareSum t = two_sum(acc.hi, sq);
  return {t.hi, let_precise("sq_lo", acc.lo + t.lo)};
}

SquareSum add_sums(const SquareSum& a, const SquareSum& b) {
  const SquareSum t = two_sum(a.hi, b.hi);
  return fast_two_sum(t.hi, let_precise("sum_lo", (a.lo + b.lo) + t.lo));
}

SquareSum workgroup_square_sum(KernelBuilder& k, const Shared<f32>& scratch, const SquareSum& part) {
  // Within a subgroup: a butterfly over lane ^ offset, offsets 1, 2, 4, .. below the subgroup
  // size (uniform branches: Vulkan's subgroups have at most 128 lanes). A partner past the
  // subgroup's active lanes (a partial subgroup) adds nothing; the first lane, which stores the
  // subgroup's sum, then still has every active lane's.
  auto lane = k.subgroup_invocation();
  auto active = let("sq_active", subgroup_ballot_bit_count(subgroup_ballot(constant<boolean>(true))));
  auto hi = k.var<f32>("sq_hi", part.hi);
  auto lo = k.var<f32>("sq_lo", part.lo);
  for (uint32_t offset = 1; offset < 128; offset *= 2) {
    if_(constant<u32>(offset) < k.subgroup_size(), [&] {
      auto other_hi = let("sq_other_hi", subgroup_shuffle_xor(Expr<f32>(hi), constant<u32>(offset)));
      auto other_lo = let("sq_other_lo", subgroup_shuffle_xor(Expr<f32>(lo), constant<u32>(offset)));
      const SquareSum both = add_sums({Expr<f32>(hi), Expr<f32>(lo)}, {other_hi, other_lo});
      auto present = let("sq_present", (lane ^ offset) < active);
      hi = select(present, both.hi, Expr<f32>(hi));
      lo = select(present, both.lo, Expr<f32>(lo));
    });
  }
  // Across subgroups, in subgroup order: every invocation reads the same pairs in the same order.
  if_(subgroup_elect(), [&] {
    scratch[k.subgroup_id() * 2u] = Expr<f32>(hi);
    scratch[k.subgroup_id() * 2u + 1u] = Expr<f32>(lo);
  });
  barrier();
  auto total_hi = k.var<f32>("sq_total_hi", scratch[0u]);
  auto total_lo = k.var<f32>("sq_total_lo", scratch[1u]);
  for_range(1u, k.num_subgroups(), [&](Expr<u32> i) {
    const SquareSum t = add_sums({Expr<f32>(total_hi), Expr<f32>(total_lo)},
                                 {Expr<f32>(scratch[i * 2u]), Expr<f32>(scratch[i * 2u + 1u])});
    total_hi = t.hi;
    total_lo = t.lo;
  }, "sg");
  return {Expr<f32>(total_hi), Expr<f32>(total_lo)};
}

Expr<f32> mean_of_square_sum(KernelBuilder&, const SquareSum& sum, uint32_t n) {
  const SquareSum s = fast_two_sum(sum.hi, sum.lo);
  auto hb = let("mean_hi_bits", bitcast<u32>(s.hi));
  auto e = let("mean_exp", (hb >> 23u) & 255u);
  // sum = N * 2^(e - 189) with N = H * 2^39 + floor(lo * 2^(189 - e)), H the significand of hi
  // (|lo| <= ulp(hi) / 2: its part is below 2^38 in magnitude, N within [2^62 - 2^38, 2^63 + 2^38)).
  auto h = let("mean_sig", cast<u64>((hb & 0x7fffffu) | 0x800000u));
  auto lo_part = let("mean_lo_part", floor(s.lo * power_of_two(316u - min(e, 254u))));
  auto big = let("mean_n", cast<u64>(cast<i64>(h << 39ul) + cast<i64>(lo_part)));
  auto q = let("mean_q", big / constant<u64>(n));
  auto r = let("mean_r", big - q * constant<u64>(n));
  // q's leading bit lies in base + 1 .. base + 4 (N / n with 2^c <= n < 2^(c + 1)).
  const uint32_t base = 59u - (31u - uint32_t(std::countl_zero(n)));
  Expr<u32> msb = constant<u32>(base);
  for (uint32_t j = 1; j <= 4; ++j) msb = msb + select((q >> uint64_t(base + j)) != 0ul, 1u, 0u);
  auto shift = let("mean_shift", msb - 23u);
  auto shift64 = cast<u64>(shift);
  auto kept = let("mean_kept", cast<u32>(q >> shift64));
  auto rem = let("mean_rem", q & ((1ul << shift64) - 1ul));
  auto half = let("mean_half", 1ul << (shift64 - 1ul));
  auto up = rem > half || (rem == half && (r != 0ul || (kept & 1u) == 1u));
  auto exact = let("mean_exact", cast<f32>(kept + select(up, 1u, 0u)) * power_of_two(shift + e - 62u));
  // A mean below ~2^-60 (eps absorbs it exactly) or not finite: the device's own.
  return let("mean", select(e >= 70u && e < 255u, exact, s.hi / static_cast<float>(n)));
}

Expr<f32> sqrt_correctly_rounded(const Expr<f32>& t) { return sqrt_correctly_rounded(t, constant<i32>(0)); }

Expr<f32> sqrt_correctly_rounded(const Expr<f32>& t, const Expr<i32>& estimate_offset) {
  auto tb = let("sqrt_bits", bitcast<u32>(t));
  auto et = let("sqrt_exp", (tb >> 23u) & 255u);
  auto m = let("sqrt_sig", cast<u64>((tb & 0x7fffffu) | 0x800000u));
  // t = T * 2^e2 with e2 even and T in [2^46, 2^48): sqrt(t) = sqrt(T) * 2^(e2 / 2), sqrt(T) in
  // [2^23, 2^24). e2 = et - 173 or et - 174 (biased by 174 below, kept unsigned).
  auto odd = let("sqrt_odd", (et & 1u) == 1u);  // et - 173 even
  auto big_t = let("sqrt_t", select(odd, m << 23ul, m << 24ul));
  auto half_exp = let("sqrt_half_exp", select(odd, (et + 1u) / 2u, et / 2u));  // (e2 + 174) / 2
  // floor(sqrt(T)): the device's estimate, one Newton step in f32 (the estimate is a few units
  // off at most), then exact corrections against 64-bit squares.
  auto r0 = let("sqrt_r0", cast<i64>(sqrt(cast<f32>(big_t))) + cast<i64>(estimate_offset));
  auto d = let("sqrt_d", cast<i64>(big_t) - r0 * r0);
  auto step = cast<i64>(floor(cast<f32>(d) / cast<f32>(r0 * 2l + 1l)));
  Expr<i64> r = let("sqrt_r1", r0 + step);
  auto ti = cast<i64>(big_t);
  for (int i = 0; i < 2; ++i) r = let("sqrt_down", r - select(r * r > ti, 1l, 0l));
  for (int i = 0; i < 2; ++i) r = let("sqrt_up", r + select((r + 1l) * (r + 1l) <= ti, 1l, 0l));
  // Round to nearest: up iff T >= (r + 1/2)^2 = r^2 + r + 1/4, i.e. T - r^2 > r (never a tie).
  auto rounded = let("sqrt_rounded", r + select(ti - r * r > r, 1l, 0l));
  // 2^(e2 / 2) has biased exponent (e2 + 174) / 2 - 87 + 127 = half_exp + 40.
  auto exact = let("sqrt_exact", cast<f32>(rounded) * power_of_two(half_exp + 40u));
  return let("sqrt_cr", select(et >= 1u && et < 255u, exact, sqrt(t)));
}

Expr<f32> rms_inverse(KernelBuilder& k, const SquareSum& sum, uint32_t n, const Expr<f32>& eps) {
  auto mean = mean_of_square_sum(k, sum, n);
  auto root = let("rms", sqrt_correctly_rounded(let("mean_eps", mean + eps)));
  return divide_correctly_rounded(k, constant<f32>(1.0f), root);
}

}  // namespace bdsl::ops
