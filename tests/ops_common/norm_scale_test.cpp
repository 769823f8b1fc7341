// RMSNorm's scale on the device against ggml's CPU arithmetic (golden::rms_norm), bit for bit:
// the correctly rounded sqrt and reciprocal of ops/common/norm_scale.h alone, then whole rows
// through the rms_norm op and the quantizer. Each needs a device with f64 (lavapipe has it).
#include "ops/common/norm_scale.h"

#include <bit>
#include <cmath>
#include <random>

#include "codegen/interface_of.h"
#include "golden/reference_ops.h"
#include "matrix_test.h"
#include "ops/common/quantize_activations.h"
#include "ops/common/rms_norm.h"

namespace bdsl::test {
namespace {

using namespace dsl;

class NormScale : public OpsMatrix {
 protected:
  void SetUp() override {
    OpsMatrix::SetUp();
    if (!ctx().info().float64) GTEST_SKIP() << "the device lacks shaderFloat64: its kernels keep the f32 scale";
  }
  // The device's target with the exact scale asked for (ModelOptions::exact_norm_scale's).
  ops::OpTarget exact() {
    ops::OpTarget t = target();
    t.exact_norm_scale = true;
    return t;
  }
  // exact() in each way the device can run it: each invocation testing every candidate, and, where
  // the subgroups allow, the tests spread over the lanes (what the kernels then use).
  std::vector<ops::OpTarget> exact_modes() {
    ops::OpTarget each = exact();
    each.subgroup_size_fixed = false;
    std::vector<ops::OpTarget> modes{each};
    if (over_lanes()) modes.push_back(exact());
    return modes;
  }
  bool over_lanes() { return ops::norm_scale_mode(exact()) == ops::NormScaleMode::ExactOverLanes; }
  // The `lanes` arguments of each() the device can run: per invocation, and over lanes where it can.
  std::vector<bool> lane_modes() { return over_lanes() ? std::vector<bool>{false, true} : std::vector<bool>{false}; }

  // fn(value, offset, lane) for every value (each from a first guess `offsets[j]` units off), on
  // the device: each invocation one value, or, with lanes, each subgroup one (every lane the same
  // value, its tests spread over the lanes). T: f32 or f64 values.
  template <class T, class V, class Fn>
  std::vector<float> each(const char* name, const std::vector<V>& values, const std::vector<int32_t>& offsets, Fn fn,
                          bool lanes) {
    const uint32_t per_group = lanes ? 64 / target().subgroup_size : 64;
    KernelBuilder k(name, {64, 1, 1});
    auto in = k.buffer<T>("value", Access::Read);
    auto off = k.buffer<i32>("offset", Access::Read);
    auto out = k.buffer<f32>("result", Access::Write);
    auto n = k.push<u32>("n");
    if (lanes) {
      auto i = let("i", k.workgroup_id().x() * per_group + k.subgroup_id());
      auto at = let("at", min(i, n - 1u));
      auto r = let("r", fn(Expr<T>(in[at]), Expr<i32>(off[at]), std::optional<Expr<u32>>(k.subgroup_invocation())));
      if_(i < n && k.subgroup_invocation() == 0u, [&] { out[i] = r; });
    } else {
      auto i = k.global_id().x();
      auto r = let("r", fn(Expr<T>(in[min(i, n - 1u)]), Expr<i32>(off[min(i, n - 1u)]), std::optional<Expr<u32>>()));
      if_(i < n, [&] { out[i] = r; });
    }
    rt::Buffer vb = buffer_of(values, "value"), ob = buffer_of(offsets, "offset"), rb = output(values.size() * 4, "result");
    run(k.build(), {vb, ob, rb}, uint32_t((values.size() + per_group - 1) / per_group), rt::push(uint32_t(values.size())));
    return rb.download<float>();
  }

  // `count` sums of n values whose mean is anywhere in [lo, hi): every third exactly an f32
  // midpoint times n (where the mean's rounding ties), the others near an f32 times n.
  static std::vector<double> sums_of(std::mt19937& rng, uint32_t n, int count, float lo, float hi) {
    std::uniform_int_distribution<uint32_t> bits(std::bit_cast<uint32_t>(lo), std::bit_cast<uint32_t>(hi));
    std::uniform_real_distribution<double> frac(-1.0, 1.0);
    std::vector<double> sums;
    for (int j = 0; j < count; ++j) {
      const float m = std::bit_cast<float>(bits(rng));
      const double mid = (double(m) + double(std::nextafter(m, 1e38f))) / 2;
      sums.push_back(j % 3 == 0 ? mid * n : double(m) * n * (1 + frac(rng) * 1e-7));
    }
    return sums;
  }

  // Values of every binade, squares of floats and their neighbours (sqrt's hard cases), and the
  // first 4000 from guesses -2..2 units off (lavapipe's f64 is exact, so the offsets reach the
  // corrections a GPU's estimate may need).
  static void cases(std::vector<float>& v, std::vector<int32_t>& offsets) {
    v.insert(v.end(), {1.0f, 2.0f, 4.0f, 0.5f, 1e-5f, 1.0000001f, 3.9999998f, 1e30f, 3.4e38f, 1.1754944e-38f});
    std::mt19937 rng(5);
    std::uniform_int_distribution<uint32_t> bits(0x00800000u, 0x7f7fffffu);
    std::uniform_int_distribution<uint32_t> root_bits(std::bit_cast<uint32_t>(1e-15f), std::bit_cast<uint32_t>(1e15f));
    for (int i = 0; i < 2000; ++i) {
      const float r = std::bit_cast<float>(root_bits(rng));
      v.push_back(r * r);
      v.push_back(std::nextafter(r * r, 0.0f));
      v.push_back(std::nextafter(r * r, 1e38f));
    }
    while (v.size() < 60000) v.push_back(std::bit_cast<float>(bits(rng)));
    for (size_t j = 0; j < v.size(); ++j) offsets.push_back(j < 4000 ? int32_t(j % 5) - 2 : 0);
  }
};

TEST_F(NormScale, SqrtIsCorrectlyRounded) {
  std::vector<float> t;
  std::vector<int32_t> offsets;
  cases(t, offsets);
  for (bool lanes : lane_modes()) {
    SCOPED_TRACE(lanes ? "over lanes" : "each invocation");
    const auto got = each<f32>("sqrt_correctly_rounded", t, offsets, ops::sqrt_correctly_rounded, lanes);
    for (size_t j = 0; j < t.size(); ++j) ASSERT_EQ(got[j], std::sqrt(t[j])) << "t = " << t[j] << " offset " << offsets[j];
  }
}

TEST_F(NormScale, ReciprocalIsCorrectlyRounded) {
  std::vector<float> r;
  std::vector<int32_t> offsets;
  cases(r, offsets);
  // 1 / r must stay a normal float: r below 2^126.
  for (float& v : r) v = std::fmod(v, 1e37f) + 1e-30f;
  for (bool lanes : lane_modes()) {
    SCOPED_TRACE(lanes ? "over lanes" : "each invocation");
    const auto got = each<f32>("reciprocal_correctly_rounded", r, offsets, ops::reciprocal_correctly_rounded, lanes);
    for (size_t j = 0; j < r.size(); ++j) ASSERT_EQ(got[j], 1.0f / r[j]) << "r = " << r[j] << " offset " << offsets[j];
  }
}

// float(sum / n) as ggml rounds it (a correctly rounded double division, then to f32), for the row
// lengths the models use and others: sums that are exactly a midpoint times n (ties: to even),
// and sums anywhere, from first guesses a unit off either way.
TEST_F(NormScale, MeanIsCorrectlyRounded) {
  std::mt19937 rng(11);
  for (uint32_t n : {1u, 3u, 64u, 1000u, 2560u, 6912u, 8191u}) {
    SCOPED_TRACE(n);
    const std::vector<double> sums = sums_of(rng, n, 20000, 1e-15f, 1e30f);
    std::vector<int32_t> offsets;
    for (size_t j = 0; j < sums.size(); ++j) offsets.push_back(int32_t(j % 3) - 1);
    for (bool lanes : lane_modes()) {
      SCOPED_TRACE(lanes ? "over lanes" : "each invocation");
      const auto got = each<f64>(
          "mean_correctly_rounded", sums, offsets,
          [n](const Expr<f64>& sum, const Expr<i32>& offset, const std::optional<Expr<u32>>& lane) {
            return ops::mean_correctly_rounded(sum, n, offset, lane);
          },
          lanes);
      for (size_t j = 0; j < sums.size(); ++j)
        ASSERT_EQ(got[j], static_cast<float>(sums[j] / double(n))) << "sum " << sums[j] << " offset " << offsets[j];
    }
  }
}

// The whole scale from a sum, 1.0f / sqrtf((float)(sum / n) + eps) as ggml computes it: from sums
// anywhere and sums on a midpoint of the mean (a third), for both small and large row lengths.
TEST_F(NormScale, InverseFromTheSumIsGgmls) {
  std::mt19937 rng(13);
  for (uint32_t n : {64u, 2560u, 6912u}) {
    for (float eps : {1e-5f, 1e-6f}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " eps " << eps);
      const std::vector<double> sums = sums_of(rng, n, 6000, 1e-12f, 1e12f);
      const std::vector<int32_t> offsets(sums.size(), 0);
      for (bool lanes : lane_modes()) {
        SCOPED_TRACE(lanes ? "over lanes" : "each invocation");
        const auto got = each<f64>(
            "rms_inverse_exact", sums, offsets,
            [n, eps](const Expr<f64>& sum, const Expr<i32>&, const std::optional<Expr<u32>>& lane) {
              return ops::rms_inverse_exact(sum, n, constant<f32>(eps), lane);
            },
            lanes);
        for (size_t j = 0; j < sums.size(); ++j) {
          const float mean = static_cast<float>(sums[j] / double(n));
          ASSERT_EQ(got[j], 1.0f / std::sqrt(mean + eps)) << "sum " << sums[j];
        }
      }
    }
  }
}

// Whole rows through the rms_norm op: the output is golden's (ggml's arithmetic) bit for bit, for
// row lengths, scales (eps dominant to huge) and rows where a sum of squares in f32 would give
// another mean (nearly all of them).
TEST_F(NormScale, RmsNormRowsAreGgmlsBitForBit) {
  for (const ops::OpTarget& mode : exact_modes())
  for (uint32_t dim : {64u, 1000u, 2560u, 6912u}) {
    for (float scale : {1e-4f, 0.01f, 1.0f, 3.0f, 1000.0f}) {
      SCOPED_TRACE(testing::Message() << "dim " << dim << " scale " << scale << (mode.subgroup_size_fixed ? " over lanes" : ""));
      const uint32_t rows = 16;
      auto x = random_floats(size_t(rows) * dim, dim + uint32_t(scale * 7), scale);
      const auto weight = random_floats(dim, 3 + dim, 1.0f);
      const float eps = 1e-5f;
      rt::Buffer xb = buffer_of(x, "x"), wb = buffer_of(weight, "weight"), out = output(x.size() * 4, "out");
      run(ops::rms_norm(mode, dim), {xb, wb, out}, rows, rt::push(eps));
      const auto got = out.download<float>();
      std::vector<float> want(dim);
      for (uint32_t r = 0; r < rows; ++r) {
        golden::rms_norm(std::span(x).subspan(size_t(r) * dim, dim), weight, eps, want);
        for (uint32_t j = 0; j < dim; ++j) ASSERT_EQ(got[size_t(r) * dim + j], want[j]) << "row " << r << " j " << j;
      }
    }
  }
}

// The norm + int8 quantizer (every projection's prologue and the prompt's norms): its normalized
// rows and int8 codes are golden's, bit for bit, whatever its workgroup (so its summation order).
TEST_F(NormScale, QuantizerRowsAreGgmlsWhateverTheWorkgroup) {
  const uint32_t dim = 2560, rows = 24;
  const auto weight = random_floats(dim, 77, 1.0f);
  const float eps = 1e-5f;
  auto x = random_floats(size_t(rows) * dim, 78, 2.0f);
  for (const ops::OpTarget& mode : exact_modes())
  for (uint32_t w : {64u, 128u, 256u}) {
    if (w > mode.max_workgroup_invocations || w % mode.subgroup_size) continue;
    SCOPED_TRACE(testing::Message() << w << (mode.subgroup_size_fixed ? " over lanes" : ""));
    ops::QuantizeOptions o;
    o.rms_norm = true;
    o.write_normalized = true;
    o.workgroup = w;
    rt::Buffer xb = buffer_of(x, "x"), wb = buffer_of(weight, "norm_weight");
    rt::Buffer qb = output(size_t(rows) * dim, "q"), ab = output(rows * 8, "act"), nb = output(x.size() * 4, "normalized");
    run(ops::quantize_activations(mode, dim, o), {xb, wb, qb, ab, nb}, rows, rt::push(eps));
    const auto normalized = nb.download<float>();
    const auto q = qb.download<int8_t>();
    std::vector<float> want(dim);
    std::vector<int8_t> want_q(dim);
    for (uint32_t r = 0; r < rows; ++r) {
      golden::rms_norm(std::span(x).subspan(size_t(r) * dim, dim), weight, eps, want);
      golden::quantize_activations(want, want_q);
      for (uint32_t j = 0; j < dim; ++j) {
        ASSERT_EQ(normalized[size_t(r) * dim + j], want[j]) << "row " << r << " j " << j;
        ASSERT_EQ(q[size_t(r) * dim + j], want_q[j]) << "row " << r << " j " << j;
      }
    }
  }
}


// The default (and a device without f64) keeps the f32 scale: its kernels ask for no f64, and they
// stay within the f32 sum's rounding of ggml's (the tolerance of EmbeddingAndNorm's test). Asked
// for on a device without f64, the kernels keep f32 too (the model refuses to ask: Model tests).
class NormScaleByDefault : public OpsMatrix {};

TEST_F(NormScaleByDefault, KernelsKeepTheF32Scale) {
  ops::OpTarget t = target();
  t.float64 = true;
  const uint32_t dim = 2560, rows = 4;
  const dsl::Kernel plain = ops::rms_norm(t, dim);
  EXPECT_FALSE(codegen::interface_of(plain).features.float64);
  t.exact_norm_scale = true;
  EXPECT_TRUE(codegen::interface_of(ops::rms_norm(t, dim)).features.float64);
  t.float64 = false;
  EXPECT_FALSE(codegen::interface_of(ops::rms_norm(t, dim)).features.float64);
  t.float64 = true;
  ops::QuantizeOptions o;
  o.rms_norm = true;
  EXPECT_TRUE(codegen::interface_of(ops::quantize_activations(t, dim, o)).features.float64);
  const auto x = random_floats(size_t(rows) * dim, 9, 3.0f), weight = random_floats(dim, 10, 2.0f);
  rt::Buffer xb = buffer_of(x, "x"), wb = buffer_of(weight, "weight"), out = output(x.size() * 4, "out");
  run(plain, {xb, wb, out}, rows, rt::push(1e-5f));
  const auto got = out.download<float>();
  std::vector<float> want(dim);
  for (uint32_t r = 0; r < rows; ++r) {
    golden::rms_norm(std::span(x).subspan(size_t(r) * dim, dim), weight, 1e-5f, want);
    for (uint32_t j = 0; j < dim; ++j)
      ASSERT_NEAR(got[size_t(r) * dim + j], want[j], 1e-4f * std::fabs(want[j]) + 1e-7f) << "row " << r << " j " << j;
  }
}

// Which way a kernel computes the scale (host only): over lanes only with a fixed subgroup size of
// at least kNormScaleLanes and every subgroup of the workgroup holding its first lanes.
TEST(NormScaleMode, OverLanesOnlyWhereEverySubgroupHasTheLanes) {
  ops::OpTarget t;
  t.subgroup_size = 32;
  t.subgroup_size_fixed = true;
  t.float64 = true;
  EXPECT_EQ(ops::norm_scale_mode(t, 64), ops::NormScaleMode::F32);  // not asked for
  t.exact_norm_scale = true;
  EXPECT_EQ(ops::norm_scale_mode(t, 64), ops::NormScaleMode::ExactOverLanes);
  EXPECT_EQ(ops::norm_scale_mode(t, 40), ops::NormScaleMode::ExactOverLanes);  // a last subgroup of 8
  EXPECT_EQ(ops::norm_scale_mode(t, 36), ops::NormScaleMode::Exact);           // ... of 4
  EXPECT_EQ(ops::norm_scale_mode(t, 4), ops::NormScaleMode::Exact);
  t.subgroup_size_fixed = false;
  EXPECT_EQ(ops::norm_scale_mode(t, 64), ops::NormScaleMode::Exact);
  t.subgroup_size_fixed = true;
  t.subgroup_size = 4;
  EXPECT_EQ(ops::norm_scale_mode(t, 64), ops::NormScaleMode::Exact);
  t.float64 = false;
  EXPECT_EQ(ops::norm_scale_mode(t, 64), ops::NormScaleMode::F32);
}

}  // namespace
}  // namespace bdsl::test
