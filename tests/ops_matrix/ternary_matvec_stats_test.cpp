// The norm statistics path of the decode projections: a producer (write_stats) leaves one
// (sum y^2, max |y * next norm weight|) part per row group; a consumer (NormalizeFromStats)
// normalizes and quantizes from those parts instead of reducing x itself. Against the CPU.
#include <cmath>

#include "matrix_test.h"
#include "ops/ternary_matvec.h"

namespace bdsl::test {
namespace {

class TernaryMatvecStats : public OpsMatrix {};

TEST_F(TernaryMatvecStats, ProducerWritesThePartsOfWhatItStored) {
  for (uint32_t rs : {1u, 2u, 3u}) {
    SCOPED_TRACE(testing::Message() << "rows per subgroup " << rs);
    const uint32_t rows = 130, cols = 256;
    const I2sWeights w = random_i2s(rows, cols, 21);
    const QuantizedX qx = quantize_cpu(random_floats(cols, 22, 2.0f));
    const auto residual = random_floats(rows, 23, 1.0f);
    const auto next = random_floats(rows, 24, 1.0f);
    ops::MatvecOptions o;
    o.add_residual = true;
    o.write_stats = true;
    o.rows_per_subgroup = rs;
    const uint32_t parts = ops::ternary_matvec_stats_parts(rows, o);
    rt::Buffer wb = buffer_of(w.bytes, "w"), qb = buffer_of(qx.words(), "x_q"), ab = buffer_of(qx.act(), "x_act");
    rt::Buffer y = buffer_of(residual, "y"), nb = buffer_of(next, "next norm"), st = output(parts * 8, "stats");
    run(ops::ternary_matvec(target(), rows, cols, o), {wb, qb, ab, y, nb, st}, ops::ternary_matvec_workgroups(target(), rows, o));
    const auto got_y = y.download<float>();
    const auto got = st.download<float>();
    for (uint32_t p = 0; p < parts; ++p) {
      double sq = 0, mx = 0;
      for (uint32_t r = p * rs; r < std::min(rows, (p + 1) * rs); ++r) {
        const float want = residual[r] + float(golden::ternary_dot(w.m.row(r), qx.q)) / qx.s * w.m.scale;
        ASSERT_LE(ulps(got_y[r], want), 3.0) << "row " << r;
        sq += double(got_y[r]) * got_y[r];
        mx = std::max(mx, std::fabs(double(got_y[r]) * next[r]));
      }
      EXPECT_NEAR(got[2 * p], sq, 1e-6 * sq + 1e-30) << "part " << p;
      EXPECT_NEAR(got[2 * p + 1], mx, 1e-6 * mx + 1e-30) << "part " << p;
    }
  }
}

// q from the parts equals the reference's q except where the two land on either side of a
// rounding boundary (their scales may differ by an ulp: see emit_quantize_with_stats); each such
// element moves an accumulator by at most 1.
TEST_F(TernaryMatvecStats, ConsumerQuantizesFromTheParts) {
  const uint32_t rows = 300, cols = 640;
  const I2sWeights w = random_i2s(rows, cols, 31);
  const auto x = random_floats(cols, 32, 3.0f);
  const auto nw = random_floats(cols, 33, 1.0f);
  std::vector<float> parts;  // as a producer with 2 rows per part would write them
  for (uint32_t i = 0; i < cols; i += 2) {
    parts.push_back(x[i] * x[i] + x[i + 1] * x[i + 1]);
    parts.push_back(std::max(std::fabs(x[i] * nw[i]), std::fabs(x[i + 1] * nw[i + 1])));
  }
  ops::MatvecOptions o;
  o.input = ops::MatvecInput::NormalizeFromStats;
  o.stats_parts = cols / 2;
  o.write_accumulators = true;
  rt::Buffer wb = buffer_of(w.bytes, "w"), xb = buffer_of(x, "x"), nb = buffer_of(nw, "norm"), sb = buffer_of(parts, "stats");
  rt::Buffer y = output(rows * 4, "y"), acc = output(rows * 4, "acc");
  run(ops::ternary_matvec(target(), rows, cols, o), {wb, xb, nb, sb, y, acc}, ops::ternary_matvec_workgroups(target(), rows, o),
      rt::push(1e-5f));
  std::vector<float> norm(cols);
  golden::rms_norm(x, nw, 1e-5f, norm);
  const QuantizedX ref = quantize_cpu(norm);
  const auto got_acc = acc.download<int32_t>();
  const auto got_y = y.download<float>();
  int exact = 0;
  for (uint32_t r = 0; r < rows; ++r) {
    const int32_t want = golden::ternary_dot(w.m.row(r), ref.q);
    ASSERT_LE(std::abs(got_acc[r] - want), 2) << "row " << r;
    exact += got_acc[r] == want;
    EXPECT_NEAR(got_y[r], float(got_acc[r]) / ref.s * w.m.scale, 1e-5 * std::fabs(got_y[r]) + 1e-6) << "row " << r;
  }
  EXPECT_GE(exact, int(rows) * 95 / 100) << "most rows see no boundary case at all";
}

}  // namespace
}  // namespace bdsl::test
