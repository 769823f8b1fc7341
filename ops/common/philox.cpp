#include "ops/common/philox.h"

#include <utility>

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

// a * b as (high, low) words, from 16-bit halves (GLSL's umulExtended has out parameters).
std::pair<Expr<u32>, Expr<u32>> multiply_wide(uint32_t a, Expr<u32> b) {
  const uint32_t al = a & 0xffffu, ah = a >> 16;
  auto bl = let("bl", b & 0xffffu);
  auto bh = let("bh", b >> 16u);
  auto ll = let("ll", bl * al);
  auto lh = let("lh", bh * al);
  auto hl = let("hl", bl * ah);
  auto mid = let("mid", (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu));
  auto high = let("high", bh * ah + (lh >> 16u) + (hl >> 16u) + (mid >> 16u));
  return {high, let("low", b * a)};
}

}  // namespace

Expr<u32> philox_first_word(Expr<u32> c0, Expr<u32> c1, Expr<u32> k0, Expr<u32> k1) {
  Expr<u32> c[4] = {c0, c1, constant<u32>(0u), constant<u32>(0u)};
  Expr<u32> key[2] = {k0, k1};
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] = let("k0", key[0] + 0x9E3779B9u);
      key[1] = let("k1", key[1] + 0xBB67AE85u);
    }
    auto [hi0, lo0] = multiply_wide(0xD2511F53u, c[0]);
    auto [hi1, lo1] = multiply_wide(0xCD9E8D57u, c[2]);
    c[0] = let("c0", hi1 ^ c[1] ^ key[0]);
    c[1] = lo1;
    c[2] = let("c2", hi0 ^ c[3] ^ key[1]);
    c[3] = lo0;
  }
  return c[0];
}

Expr<f32> open_unit_interval(Expr<u32> bits) {
  return (Expr<f32>(cast<f32>(bits >> 8u)) + 0.5f) * 0x1.0p-24f;
}

}  // namespace bdsl::ops
