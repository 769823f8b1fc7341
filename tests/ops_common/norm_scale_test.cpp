// RMSNorm's scale on the device against ggml's CPU arithmetic (golden::rms_norm), bit for bit:
// the correctly rounded sqrt and mean of ops/common/norm_scale.h alone, then whole rows.
#include "ops/common/norm_scale.h"

#include <bit>
#include <cmath>
#include <random>

#include "golden/reference_ops.h"
#include "matrix_test.h"
#include "ops/common/rms_norm.h"

namespace bdsl::test {
namespace {

using namespace dsl;

class NormScale : public OpsMatrix {};

// sqrt(t) as the CPU's sqrtf over many floats (every binade, both exponent parities, squares of
// floats and their neighbours), and from first guesses up to 8 units off either way (lavapipe's
// own sqrt is exact, so the offsets reach the corrections a GPU's estimate needs).
TEST_F(NormScale, SqrtIsCorrectlyRounded) {
  std::vector<float> t{1.0f, 2.0f, 4.0f, 0.5f, 1e-5f, 1.0000001f, 3.9999998f, 1e30f, 3.4e38f, 1.1754944e-38f};
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits(0x00800000u, 0x7f7fffffu);
  std::uniform_int_distribution<uint32_t> root_bits(std::bit_cast<uint32_t>(1e-15f), std::bit_cast<uint32_t>(1e15f));
  for (int i = 0; i < 2000; ++i) {
    const float r = std::bit_cast<float>(root_bits(rng));
    t.push_back(r * r);
    t.push_back(std::nextafter(r * r, 0.0f));
    t.push_back(std::nextafter(r * r, 1e38f));
  }
  while (t.size() < 60000) t.push_back(std::bit_cast<float>(bits(rng)));
  std::vector<float> ts;
  std::vector<int32_t> offsets;
  for (size_t j = 0; j < t.size(); ++j) {
    ts.push_back(t[j]);
    offsets.push_back(j < 4000 ? int32_t(j % 17) - 8 : 0);
  }
  KernelBuilder k("sqrt_correctly_rounded", {64, 1, 1});
  auto in = k.buffer<f32>("t", Access::Read);
  auto off = k.buffer<i32>("offset", Access::Read);
  auto out = k.buffer<f32>("root", Access::Write);
  auto n = k.push<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] { out[i] = ops::sqrt_correctly_rounded(Expr<f32>(in[i]), Expr<i32>(off[i])); });
  rt::Buffer tb = buffer_of(ts, "t"), ob = buffer_of(offsets, "offset"), rb = output(ts.size() * 4, "root");
  run(k.build(), {tb, ob, rb}, uint32_t((ts.size() + 63) / 64), rt::push(uint32_t(ts.size())));
  const auto got = rb.download<float>();
  for (size_t j = 0; j < ts.size(); ++j) ASSERT_EQ(got[j], std::sqrt(ts[j])) << "t = " << ts[j] << " offset " << offsets[j];
}

// float((hi + lo) / n) correctly rounded, for the row lengths the models use and others, over
// pairs with lo anywhere within half an ulp of hi (the reference: the pair and the quotient in
// long double, 64 significant bits, far more than decide an f32).
TEST_F(NormScale, MeanOfAPairIsCorrectlyRounded) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits(std::bit_cast<uint32_t>(1e-15f), std::bit_cast<uint32_t>(1e30f));
  std::uniform_real_distribution<float> frac(-0.5f, 0.5f);
  for (uint32_t n : {1u, 3u, 128u, 2560u, 6912u, 14336u, 8191u}) {
    SCOPED_TRACE(n);
    std::vector<float> hi, lo;
    for (int j = 0; j < 20000; ++j) {
      const float h = std::bit_cast<float>(bits(rng));
      const float ulp = std::nextafter(h, 1e38f) - h;
      hi.push_back(h);
      lo.push_back(j % 5 == 0 ? 0.0f : frac(rng) * ulp);
    }
    KernelBuilder k("mean_of_square_sum", {64, 1, 1});
    auto hb = k.buffer<f32>("hi", Access::Read);
    auto lb = k.buffer<f32>("lo", Access::Read);
    auto out = k.buffer<f32>("mean", Access::Write);
    auto count = k.push<u32>("count");
    auto i = k.global_id().x();
    if_(i < count, [&] { out[i] = ops::mean_of_square_sum(k, {Expr<f32>(hb[i]), Expr<f32>(lb[i])}, n); });
    rt::Buffer hbuf = buffer_of(hi, "hi"), lbuf = buffer_of(lo, "lo"), mb = output(hi.size() * 4, "mean");
    run(k.build(), {hbuf, lbuf, mb}, uint32_t((hi.size() + 63) / 64), rt::push(uint32_t(hi.size())));
    const auto got = mb.download<float>();
    for (size_t j = 0; j < hi.size(); ++j) {
      const long double exact = ((long double)hi[j] + (long double)lo[j]) / (long double)n;
      ASSERT_EQ(got[j], static_cast<float>(exact)) << "hi " << hi[j] << " lo " << lo[j];
    }
  }
}

// Whole rows through the rms_norm op: the output is golden's (ggml's arithmetic) bit for bit, for
// row lengths, scales (eps dominant to huge) and rows where a sum of squares in f32 would give
// another mean (nearly all of them).
TEST_F(NormScale, RmsNormRowsAreGgmlsBitForBit) {
  for (uint32_t dim : {64u, 1000u, 2560u, 6912u}) {
    for (float scale : {1e-4f, 0.01f, 1.0f, 3.0f, 1000.0f}) {
      SCOPED_TRACE(testing::Message() << "dim " << dim << " scale " << scale);
      const uint32_t rows = 16;
      auto x = random_floats(size_t(rows) * dim, dim + uint32_t(scale * 7), scale);
      const auto weight = random_floats(dim, 3 + dim, 1.0f);
      const float eps = 1e-5f;
      rt::Buffer xb = buffer_of(x, "x"), wb = buffer_of(weight, "weight"), out = output(x.size() * 4, "out");
      run(ops::rms_norm(target(), dim), {xb, wb, out}, rows, rt::push(eps));
      const auto got = out.download<float>();
      std::vector<float> want(dim);
      for (uint32_t r = 0; r < rows; ++r) {
        golden::rms_norm(std::span(x).subspan(size_t(r) * dim, dim), weight, eps, want);
        for (uint32_t j = 0; j < dim; ++j) ASSERT_EQ(got[size_t(r) * dim + j], want[j]) << "row " << r << " j " << j;
      }
    }
  }
}

}  // namespace
}  // namespace bdsl::test
