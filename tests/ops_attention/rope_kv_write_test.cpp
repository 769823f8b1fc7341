// rope_kv_write against golden::rope_neox on the device: q turned in place, k turned and v copied
// into the F16 cache row of each token's position, nothing else written.
#include <cmath>
#include <span>

#include "golden/reference_ops.h"
#include "models/numerics/half_float.h"
#include "models/numerics/rope.h"
#include "ops/attention/rope_kv_write.h"
#include "ops_test_util.h"

namespace bdsl::test {
namespace {

constexpr uint32_t kUntouched = 0xdeadbeefu;

struct RopeCase {
  ops::AttentionDims dims;
  uint32_t context, pos, n;
};

// Half the F16 spacing at x: the most that rounding x to F16 moves it.
double half_f16_ulp(double x) {
  const double a = std::fabs(x);
  return a < std::ldexp(1.0, -14) ? std::ldexp(1.0, -25) : std::ldexp(1.0, int(std::floor(std::log2(a))) - 11);
}

class RopeKvWrite : public OpsTest {
 protected:
  // Runs one dispatch; returns the largest error of q relative to its pair's length.
  double check(const RopeCase& c) {
    const auto& d = c.dims;
    const float base = 500000.0f;
    auto q = random_floats(size_t(c.n) * d.q_width(), 11 + c.pos, 2.0f);
    const auto k = random_floats(size_t(c.n) * d.kv_width(), 12 + c.pos, 2.0f);
    const auto v = random_floats(size_t(c.n) * d.kv_width(), 13 + c.pos, 2.0f);
    const std::vector<uint32_t> empty(size_t(c.context) * d.kv_words(), kUntouched);
    rt::Buffer step = step_buffer(0, c.pos), qb = buffer_of(q, "q"), kb = buffer_of(k, "k"), vb = buffer_of(v, "v");
    rt::Buffer kc = buffer_of(empty, "k_cache"), vc = buffer_of(empty, "v_cache");
    const uint32_t wg = ops::rope_kv_write_workgroup(target());
    const uint32_t units = (d.n_heads + 2 * d.n_kv_heads) * d.head_dim / 4;
    rt::Buffer table = buffer_of(numerics::rope_table(c.context, d.head_dim, base), "rope_table");
    run(ops::rope_kv_write(target(), d, c.context), {step, table, qb, kb, vb, kc, vc}, rt::push(c.n),
        rt::Grid{(units + wg - 1) / wg, c.n});
    const auto q_got = qb.download<float>();
    const auto k_got = kc.download<uint32_t>(), v_got = vc.download<uint32_t>();

    double worst = 0;
    const uint32_t hd = d.head_dim, half = hd / 2;
    for (uint32_t t = 0; t < c.n; ++t) {
      const uint32_t pos = c.pos + t;
      for (uint32_t h = 0; h < d.n_heads; ++h) {
        std::span<float> head(q.data() + size_t(t) * d.q_width() + h * hd, hd);
        std::vector<float> before(head.begin(), head.end());
        golden::rope_neox(head, pos, hd, base);
        for (uint32_t i = 0; i < half; ++i) {
          const double len = std::hypot(before[i], before[i + half]);
          for (uint32_t e : {i, i + half}) {
            // q is stored at F16 precision (bitnet.cpp's rounding point before q.K): what is
            // beyond half an F16 ulp of the reference is the rotation's own error.
            const double got = q_got[size_t(t) * d.q_width() + h * hd + e], ref = head[e];
            const double err = std::max(0.0, std::fabs(got - ref) - half_f16_ulp(ref)) / len;
            worst = std::max(worst, err);
            EXPECT_EQ(got, numerics::f16_to_f32(numerics::f32_to_f16(float(got)))) << "q at F16 precision";
          }
        }
      }
      for (uint32_t kv = 0; kv < d.n_kv_heads; ++kv) {
        std::vector<float> kr(k.begin() + size_t(t) * d.kv_width() + kv * hd,
                              k.begin() + size_t(t) * d.kv_width() + (kv + 1) * hd);
        golden::rope_neox(kr, pos, hd, base);
        for (uint32_t e = 0; e < hd; ++e) {
          const size_t word = (size_t(pos) * d.kv_width() + kv * hd + e) / 2;
          const float got_k = unpack_f16({k_got[word]})[e % 2], got_v = unpack_f16({v_got[word]})[e % 2];
          // k: one F16 rounding (half an ulp, 2^-11 relative) of a value within the q tolerance
          // (1e-6 of a pair's length, |pair| < 3) of the reference.
          const float kref = kr[e];
          EXPECT_NEAR(got_k, kref, std::fabs(kref) / 2048.0f + 3e-6f) << "t " << t << " kv " << kv << " e " << e;
          // v is only rounded to F16: bit for bit.
          EXPECT_EQ(got_v, numerics::f16_to_f32(numerics::f32_to_f16(v[size_t(t) * d.kv_width() + kv * hd + e])));
        }
      }
    }
    // Every other cache row keeps its old contents.
    for (size_t w = 0; w < empty.size(); ++w) {
      const size_t row = w / d.kv_words();
      if (row >= c.pos && row < c.pos + c.n) continue;
      EXPECT_EQ(k_got[w], kUntouched) << "k_cache row " << row;
      EXPECT_EQ(v_got[w], kUntouched) << "v_cache row " << row;
      if (k_got[w] != kUntouched) break;
    }
    return worst;
  }
};

constexpr ops::AttentionDims kTiny{8, 2, 64};
constexpr ops::AttentionDims k2B{20, 5, 128};

// Tolerance for q beyond its F16 rounding, relative to the length of each turned pair: 1e-6 at every position up to the
// 4096 context. The reference takes the angle in double and rounds cos and sin to float, then
// turns in f32 (~1.2e-7 each); the kernel carries the frequency and the angle in two floats and
// reduces it exactly, so sin/cos see an argument within ~1e-7 (measured: 2.9e-7 worst at
// pos 4000, head_dim 128; the plain f32 angle was 3.6e-4 there).
constexpr double kRopeTolerance = 1e-6;
TEST_F(RopeKvWrite, SmallPositionsDecode) {
  for (const auto& dims : {kTiny, k2B})
    for (uint32_t pos : {0u, 1u, 2u, 100u}) {
      const double worst = check({dims, 256, pos, 1});
      EXPECT_LT(worst, kRopeTolerance) << "pos " << pos;
    }
}

TEST_F(RopeKvWrite, LargePositionsStayAccurate) {
  for (const auto& dims : {kTiny, k2B})
    for (uint32_t pos : {4000u, 4095u}) {
      const double worst = check({dims, 4096, pos, 1});
      RecordProperty("worst_relative_error_pos_" + std::to_string(pos), std::to_string(worst));
      EXPECT_LT(worst, kRopeTolerance) << "pos " << pos;
    }
}

TEST_F(RopeKvWrite, BatchWritesEveryTokensRowAndStopsAtTheContextEnd) {
  check({kTiny, 64, 5, 7});
  // Odd head counts, head_dim 12 (not a power of two: the f32 exp2 frequency, fine at small positions).
  EXPECT_LT(check({{6, 3, 12}, 64, 0, 5}), 2e-6);
  // Tokens 2 and 3 of this block are past a 64-position context: q still turns, nothing is written.
  const double worst = check({kTiny, 64, 60, 2});
  EXPECT_LT(worst, kRopeTolerance);
}

}  // namespace
}  // namespace bdsl::test
