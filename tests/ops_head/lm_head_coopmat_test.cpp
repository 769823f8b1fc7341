// lm_head_coopmat (the LM head of a decode step on tensor cores) against a double-precision sum of
// f16(table) x f16(x) per (token, row), on a device that lists an f16 cooperative-matrix shape
// (an H100); skipped elsewhere (lavapipe has none). Also: each token's logits are the same bits
// whatever the step's other tokens, and pack_half (its input) against numerics::f32_to_f16.
#include "ops/common/pack_half.h"
#include "ops/head/lm_head_coopmat.h"

#include <cmath>

#include "matrix_test.h"
#include "models/numerics/half_float.h"

namespace bdsl::test {
namespace {

class LmHeadCoopmat : public OpsMatrix {
 protected:
  bool has_shape() { return ops::lm_head_coopmat_shape(target()).has_value(); }
  std::string why_skipped() {
    return "device " + ctx().info().name + " lists no VK_NV_cooperative_matrix shape 16x8x16 or 16x16x16 f16*f16+f32 "
           "(lavapipe has none): lm_head_batch runs there instead";
  }

  struct Head {
    std::vector<float> logits;  // [tokens_cap, stride]
    uint32_t stride;
  };
  // The logits of `tokens` rows of x (f16 bits) against the table (f16 bits).
  Head logits_of(const std::vector<uint16_t>& table, const std::vector<uint16_t>& x, uint32_t vocab, uint32_t dim, uint32_t tokens) {
    const uint32_t cap = ops::lm_head_coopmat_tokens(target(), tokens);
    std::vector<uint16_t> xs(size_t(cap) * dim, 0);
    std::copy(x.begin(), x.begin() + size_t(tokens) * dim, xs.begin());
    const uint32_t stride = (vocab + 15) / 16 * 16;
    rt::Buffer tb = buffer_of(table, "table"), xb = buffer_of(xs, "x"), out = output(uint64_t(cap) * stride * 4, "logits");
    rt::Pipeline p = pipeline(ops::lm_head_coopmat(target(), vocab, dim, tokens));
    rt::Graph g(ctx());
    g.dispatch(p, {{"x", xb}, {"table0", tb}, {"logits", out}}, rt::push(stride), rt::Grid{ops::lm_head_coopmat_workgroups(target(), vocab)});
    g.submit_and_wait();
    return {out.download<float>(), stride};
  }
};

TEST_F(LmHeadCoopmat, EveryLogitMatchesTheF16Products) {
  if (!has_shape()) GTEST_SKIP() << why_skipped();
  struct Case {
    uint32_t vocab, dim, tokens;
  };
  // A vocabulary that fills no tile (the last tile overlaps), one token, a tile and a half, the 2B width.
  for (Case c : {Case{1000, 256, 1}, Case{77, 64, 13}, Case{4096, 2560, 64}, Case{16, 16, 8}}) {
    SCOPED_TRACE(testing::Message() << c.vocab << "x" << c.dim << ", " << c.tokens << " tokens");
    std::mt19937 rng(c.vocab + c.dim + c.tokens);
    std::normal_distribution<float> d(0.0f, 0.05f);
    std::vector<uint16_t> table(size_t(c.vocab) * c.dim), x(size_t(c.tokens) * c.dim);
    for (uint16_t& h : table) h = numerics::f32_to_f16(d(rng));
    for (uint16_t& h : x) h = numerics::f32_to_f16(3.0f * d(rng) / 0.05f);
    const Head r = logits_of(table, x, c.vocab, c.dim, c.tokens);
    for (uint32_t t = 0; t < c.tokens; ++t)
      for (uint32_t row = 0; row < c.vocab; ++row) {
        double want = 0, magnitude = 0;
        for (uint32_t i = 0; i < c.dim; ++i) {
          const double p = double(numerics::f16_to_f32(table[size_t(row) * c.dim + i])) * numerics::f16_to_f32(x[size_t(t) * c.dim + i]);
          want += p;
          magnitude += std::fabs(p);
        }
        // f32 sums of exact products: a few ulps of the magnitude summed.
        ASSERT_NEAR(r.logits[size_t(t) * r.stride + row], want, 1e-6 * magnitude + 1e-30) << "token " << t << " row " << row;
      }
  }
}

TEST_F(LmHeadCoopmat, ATokensLogitsDoNotDependOnTheOtherTokens) {
  if (!has_shape()) GTEST_SKIP() << why_skipped();
  const uint32_t vocab = 512, dim = 256;
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> table(size_t(vocab) * dim), x(size_t(40) * dim);
  for (uint16_t& h : table) h = numerics::f32_to_f16(0.05f * d(rng));
  for (uint16_t& h : x) h = numerics::f32_to_f16(d(rng));
  const Head crowd = logits_of(table, x, vocab, dim, 40);
  for (uint32_t t : {0u, 17u, 39u}) {
    const std::vector<uint16_t> one(x.begin() + size_t(t) * dim, x.begin() + size_t(t + 1) * dim);
    const Head alone = logits_of(table, one, vocab, dim, 1);
    for (uint32_t row = 0; row < vocab; ++row)
      ASSERT_EQ(crowd.logits[size_t(t) * crowd.stride + row], alone.logits[row]) << "token " << t << " row " << row;
  }
}

class PackHalf : public OpsMatrix {};

TEST_F(PackHalf, RoundsEveryValueAsTheCpuDoes) {
  const uint32_t count = 1000;  // vec4s: not a multiple of the workgroup
  auto x = random_floats(count * 4, 3, 20.0f);
  // Zeros, the largest half, a tie that rounds to even. (Subnormal halves are left out: a device
  // may flush them.)
  x[0] = 0.0f, x[1] = -0.0f, x[2] = 65504.0f, x[3] = 1.0f + 1.0f / 2048.0f;
  rt::Buffer xb = buffer_of(x, "x"), y = output(count * 8ull, "halves");
  rt::Pipeline p = pipeline(ops::pack_half(target()));
  rt::Graph g(ctx());
  g.dispatch(p, {{"x", xb}, {"y", y}}, rt::push(count), rt::Grid{(count + ops::pack_half_workgroup(target()) - 1) /
                                                                   ops::pack_half_workgroup(target())});
  g.submit_and_wait();
  const auto got = y.download<uint16_t>();
  for (uint32_t i = 0; i < count * 4; ++i) ASSERT_EQ(got[i], numerics::f32_to_f16(x[i])) << "value " << i << " = " << x[i];
}

}  // namespace
}  // namespace bdsl::test
