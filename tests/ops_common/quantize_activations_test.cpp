// quantize_activations against golden::quantize_activations (and golden::rms_norm in front).
#include "ops/common/quantize_activations.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "matrix_test.h"
#include "ops/common/exact_division.h"

namespace bdsl::test {
namespace {

struct GpuQuantized {
  std::vector<uint32_t> words;
  std::vector<uint32_t> act;
  std::vector<float> normalized;
  int8_t q(size_t token, size_t dim, size_t i) const {
    return static_cast<int8_t>(words[token * dim / 4 + i / 4] >> (8 * (i % 4)));
  }
  float s(size_t token) const { return std::bit_cast<float>(act[2 * token]); }
  int32_t sum(size_t token) const { return std::bit_cast<int32_t>(act[2 * token + 1]); }
};

class QuantizeActivations : public OpsMatrix {
 protected:
  GpuQuantized quantize(const std::vector<float>& x, uint32_t dim, const std::vector<float>* norm_weight = nullptr,
                        float eps = 1e-5f) {
    return quantize_inputs({x}, dim, norm_weight, eps);
  }
  // inputs: {x}, or {gate, up} for gate_up_input (`activation`).
  GpuQuantized quantize_inputs(const std::vector<std::vector<float>>& inputs, uint32_t dim,
                               const std::vector<float>* norm_weight = nullptr, float eps = 1e-5f,
                               ops::GateActivation activation = ops::GateActivation::Relu2) {
    const std::vector<float>& x = inputs[0];
    const auto tokens = static_cast<uint32_t>(x.size() / dim);
    ops::QuantizeOptions o;
    o.rms_norm = norm_weight != nullptr;
    o.write_normalized = o.rms_norm;
    if (inputs.size() == 2) o.gate_up_input = activation;
    std::vector<rt::Buffer> ins;
    for (const auto& in : inputs) ins.push_back(buffer_of(in, "input"));
    rt::Buffer wb = buffer_of(norm_weight ? *norm_weight : std::vector<float>{0.0f}, "norm_weight");
    rt::Buffer q = output(x.size(), "q"), act = output(tokens * 8, "act"), nb = output(x.size() * 4, "normalized");
    std::vector<rt::BufferSlice> bindings(ins.begin(), ins.end());
    if (o.rms_norm) bindings.push_back(wb);
    bindings.push_back(q);
    bindings.push_back(act);
    if (o.write_normalized) bindings.push_back(nb);
    run(ops::quantize_activations(target(), dim, o), bindings, tokens, o.rms_norm ? rt::push(eps) : rt::PushConstants{});
    return {q.download<uint32_t>(), act.download<uint32_t>(), o.write_normalized ? nb.download<float>() : std::vector<float>{}};
  }

  // q, s and sum(q) as the CPU quantizes the kernel's own normalized vector.
  void expect_own_quantization(const GpuQuantized& got, uint32_t dim, uint32_t tokens) {
    for (size_t t = 0; t < tokens; ++t) {
      const QuantizedX own = quantize_cpu(std::span(got.normalized).subspan(t * dim, dim));
      ASSERT_EQ(got.s(t), own.s) << "token " << t;
      ASSERT_EQ(got.sum(t), own.sum) << "token " << t;
      for (size_t i = 0; i < dim; ++i) ASSERT_EQ(got.q(t, dim, i), own.q[i]) << "token " << t << " element " << i;
    }
  }

  // Without a norm the arithmetic is golden's exactly (max, one division, one multiply, roundEven
  // and clamp, all correctly rounded on lavapipe), so q, s and sum(q) must match bit for bit.
  void expect_exact(const std::vector<float>& x, uint32_t dim) {
    const GpuQuantized got = quantize(x, dim);
    for (size_t t = 0; t < x.size() / dim; ++t) {
      const QuantizedX want = quantize_cpu(std::span(x).subspan(t * dim, dim));
      ASSERT_EQ(got.s(t), want.s) << "token " << t;
      ASSERT_EQ(got.sum(t), want.sum) << "token " << t;
      for (size_t i = 0; i < dim; ++i) ASSERT_EQ(got.q(t, dim, i), want.q[i]) << "token " << t << " element " << i;
    }
  }
};

TEST_F(QuantizeActivations, MatchesGoldenBitForBitAtModelAndOddSizes) {
  for (uint32_t dim : {4u, 12u, 132u, 1000u, 2560u, 6912u}) {
    SCOPED_TRACE(dim);
    expect_exact(random_floats(dim, dim, 3.0f), dim);
  }
}

TEST_F(QuantizeActivations, OneWorkgroupPerTokenOfABatch) {
  std::vector<float> x = random_floats(3 * 260, 7);
  for (size_t i = 260; i < 520; ++i) x[i] *= 100.0f;  // tokens with different scales
  expect_exact(x, 260);
}

TEST_F(QuantizeActivations, RoundsTiesToEvenAndFloorsTheScale) {
  // absmax 127 gives s = 1, so x * s is x: halves are ties.
  std::vector<float> x{127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -127.0f, 3.49f, -3.51f, 0.0f};
  const GpuQuantized got = quantize(x, uint32_t(x.size()));
  const std::vector<int8_t> want{127, 0, 2, 2, 0, -2, -2, 126, -127, 3, -4, 0};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got.q(0, x.size(), i), want[i]) << i;
  EXPECT_EQ(got.s(0), 1.0f);
  // An all-zero vector uses the absmax floor 1e-5 (no division by zero) and quantizes to zeros.
  const GpuQuantized zero = quantize(std::vector<float>(8, 0.0f), 8);
  EXPECT_EQ(zero.s(0), 127.0f / 1e-5f);
  EXPECT_EQ(zero.sum(0), 0);
}

// The kernel has no clamp to [-128, 127] (emit_quantize_activations: |x * s| rounds to at most
// 127 by construction): golden's clamped q bit for bit at every magnitude, tiny absmax below the
// 1e-5 floor included, with elements a few ulp under the absmax of either sign.
TEST_F(QuantizeActivations, NoElementNeedsTheClamp) {
  const uint32_t dim = 64;
  std::vector<float> x;
  uint32_t seed = 40;
  for (float magnitude : {1e-7f, 9.99e-6f, 1e-5f, 1.01e-5f, 0.3f, 1.0f, 3.3f, 127.0f, 1e4f, 1e30f})
    for (float sign : {1.0f, -1.0f}) {
      std::vector<float> token = random_floats(dim, ++seed, magnitude / 4);
      for (float& v : token) v = std::clamp(v, -magnitude, magnitude);
      for (uint32_t k = 0; k < 8; ++k) token[k] = (k % 2 ? -sign : sign) * magnitude * (1.0f - float(k / 2) * 0x1p-24f);
      x.insert(x.end(), token.begin(), token.end());
    }
  expect_exact(x, dim);
}

// With the norm, the GPU sums squares in another order than golden::rms_norm, so the normalized
// values differ by a few ulp: each is x * inv * w with inv from a mean whose relative error is at
// most (chain length) * 2^-24, the chain being dim / workgroup + subgroups + log2(subgroup) < 64
// adds here, i.e. < 4e-6; sqrt halves it and three roundings add < 2e-7. 1e-5 relative holds it.
// q is then checked exactly against golden's quantizer applied to the GPU's own normalized
// vector, and against golden's end to end within one step where x * s lands near a half.
TEST_F(QuantizeActivations, FusedRmsNormMatchesGolden) {
  for (uint32_t dim : {128u, 1000u, 2560u, 6912u}) {
    SCOPED_TRACE(dim);
    const auto x = random_floats(dim, dim + 1, 2.0f);
    auto w = random_floats(dim, dim + 2, 0.5f);
    const GpuQuantized got = quantize(x, dim, &w);
    std::vector<float> norm(dim);
    golden::rms_norm(x, w, 1e-5f, norm);
    for (size_t i = 0; i < dim; ++i)
      ASSERT_NEAR(got.normalized[i], norm[i], 1e-5f * std::fabs(norm[i]) + 1e-30f) << i;
    expect_own_quantization(got, dim, 1);
    const QuantizedX ref = quantize_cpu(norm);
    EXPECT_NEAR(got.s(0), ref.s, 1e-5f * ref.s);
    for (size_t i = 0; i < dim; ++i) ASSERT_LE(std::abs(got.q(0, dim, i) - ref.q[i]), 1) << i;
  }
}

// The absmax the scale comes from is the largest |x * inv * w| as the kernel rounds each one,
// whichever element holds it: two elements tied at the top, tops a few ulp apart whose roundings
// may swap them, the top in the last, partial word, a norm weight or an input far out of the
// usual range, and an all-zero row. The kernel's own normalized vector quantized on the CPU
// gives the scale, the sum and every q it must write.
TEST_F(QuantizeActivations, FusedRmsNormAbsmaxAtTiesAndNearTies) {
  for (uint32_t dim : {1000u, 2560u}) {
    SCOPED_TRACE(dim);
    std::vector<std::vector<float>> xs, ws;
    auto add = [&](uint32_t seed, const std::function<void(std::vector<float>&, std::vector<float>&)>& edit) {
      std::vector<float> x = random_floats(dim, seed, 1.0f), w = random_floats(dim, seed + 1, 0.5f);
      edit(x, w);
      xs.push_back(x);
      ws.push_back(w);
    };
    const uint32_t last = dim - 1, mid = dim / 2;
    add(1, [&](auto& x, auto& w) { x[3] = x[mid] = 9.0f; w[3] = w[mid] = 0.75f; });            // an exact tie
    add(2, [&](auto& x, auto& w) { x[3] = -9.0f; x[last] = 9.0f; w[3] = w[last] = 0.75f; });  // tie of signs, last word
    for (uint32_t ulps = 1; ulps <= 8; ++ulps)  // keys a few ulp apart, from other x and w
      add(10 + ulps, [&](auto& x, auto& w) {
        x[5] = 7.0f;
        w[5] = 0.6f;
        x[last - 2] = 7.0f * 0.6f / 0.7f * (1.0f + float(ulps) * 0x1p-24f);
        w[last - 2] = 0.7f;
      });
    add(30, [&](auto& x, auto& w) { w[7] = 2.0e7f; x[7] = 1.0e-6f; });   // a norm weight far out
    add(31, [&](auto& x, auto&) { x[9] = 3.0e20f; });                    // an input far out
    add(32, [&](auto& x, auto&) { std::fill(x.begin(), x.end(), 0.0f); });  // all zero
    for (size_t t = 0; t < xs.size(); ++t) {
      SCOPED_TRACE(t);
      expect_own_quantization(quantize(xs[t], dim, &ws[t]), dim, 1);
    }
  }
  // Many rows whose two largest |x * w| are 0-3 ulp apart, from different x and w: in some of
  // them the roundings of x * inv * w put the other element on top.
  const uint32_t dim = 128, tokens = 512;
  std::vector<float> w = random_floats(dim, 50, 0.5f);
  w[11] = 0.6137f;
  w[100] = 0.8291f;
  std::vector<float> x = random_floats(dim * tokens, 51, 1.0f);
  std::mt19937 rng(52);
  for (uint32_t t = 0; t < tokens; ++t) {
    float* row = &x[size_t(t) * dim];
    row[11] = 4.0f + std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
    const int ulps = std::uniform_int_distribution<int>(-3, 3)(rng);
    row[100] = row[11] * w[11] / w[100] * (1.0f + float(ulps) * 0x1p-24f);
  }
  expect_own_quantization(quantize(x, dim, &w), dim, tokens);
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

// The activation scale must be golden's bit for bit on devices whose `/` is not correctly rounded:
// the integer long division against the CPU's IEEE division over many denominators, including
// the absmax floor, powers of two, significands at both ends and quotients that round up a binade.
TEST_F(QuantizeActivations, ScaleDivisionIsCorrectlyRounded) {
  std::vector<float> d{1e-5f, 1.0f, 2.0f, 0.5f, 127.0f, 254.0f, 3.0f, 1.9999999f, 1.0000001f, 1e30f, 3.4e38f, 63.5f};
  std::mt19937 rng(99);
  std::uniform_int_distribution<uint32_t> bits(std::bit_cast<uint32_t>(1e-5f), std::bit_cast<uint32_t>(3.0e38f));
  while (d.size() < 100000) d.push_back(std::bit_cast<float>(bits(rng)));
  using namespace dsl;
  KernelBuilder k("divide_127", {64, 1, 1});
  auto in = k.buffer<f32>("d", Access::Read);
  auto out = k.buffer<f32>("q", Access::Write);
  auto n = k.push<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] { out[i] = ops::divide_correctly_rounded(k, constant<f32>(127.0f), Expr<f32>(in[i])); });
  rt::Buffer db = buffer_of(d, "d"), qb = output(d.size() * 4, "q");
  run(k.build(), {db, qb}, uint32_t((d.size() + 63) / 64), rt::push(uint32_t(d.size())));
  const auto got = qb.download<float>();
  for (size_t j = 0; j < d.size(); ++j) ASSERT_EQ(got[j], 127.0f / d[j]) << "d = " << d[j];
}

// The device's own `/` is only the estimate: lavapipe's is exact, so the test hands the kernel
// estimates off by up to 12 ulps either way (the residual's range, to its edge and past it), far-off
// ones (the long-division fallback), and checks the answer is still the CPU's bit for bit.
TEST_F(QuantizeActivations, ScaleDivisionIsExactFromAnyEstimate) {
  std::vector<float> d{1e-5f, 1.0f, 2.0f, 0.5f, 127.0f, 254.0f, 3.0f, 1.9999999f, 1.0000001f, 1e30f, 63.5f, 127.00001f};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(std::bit_cast<uint32_t>(1e-5f), std::bit_cast<uint32_t>(1.0e37f));
  while (d.size() < 4000) d.push_back(std::bit_cast<float>(bits(rng)));
  std::vector<float> den, est;
  for (float v : d) {
    const float exact = 127.0f / v;
    for (int off : {-12, -7, -4, -3, -2, -1, 0, 1, 2, 3, 4, 7, 12}) {
      float e = exact;
      for (int s = 0; s < std::abs(off); ++s) e = std::nextafter(e, off < 0 ? 0.0f : 1e38f);
      den.push_back(v);
      est.push_back(e);
    }
    for (float far : {exact * 1.5f, exact * 0.6f, 0.0f, std::numeric_limits<float>::infinity()}) {
      den.push_back(v);
      est.push_back(far);
    }
  }
  using namespace dsl;
  KernelBuilder k("divide_127_from_estimate", {64, 1, 1});
  auto in = k.buffer<f32>("d", Access::Read);
  auto estimate = k.buffer<f32>("estimate", Access::Read);
  auto out = k.buffer<f32>("q", Access::Write);
  auto n = k.push<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] { out[i] = ops::divide_correctly_rounded(k, constant<f32>(127.0f), Expr<f32>(in[i]), Expr<f32>(estimate[i])); });
  rt::Buffer db = buffer_of(den, "d"), eb = buffer_of(est, "estimate"), qb = output(den.size() * 4, "q");
  run(k.build(), {db, eb, qb}, uint32_t((den.size() + 63) / 64), rt::push(uint32_t(den.size())));
  const auto got = qb.download<float>();
  for (size_t j = 0; j < den.size(); ++j)
    ASSERT_EQ(got[j], 127.0f / den[j]) << "d = " << den[j] << ", estimate " << est[j];
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

// golden::relu2_gate row by row: what the fused gate/up matvec writes and ffn_sub_norm reads.
std::vector<float> relu2_gate_cpu(const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<float> out(gate.size());
  golden::relu2_gate(gate, up, out);
  return out;
}

// Prefill's separate gate and up projections: the quantize reads both and forms relu(gate)^2 * up.
// Without the norm every step is one correctly rounded operation, so it matches golden exactly.
TEST_F(QuantizeActivations, Relu2GateUpInputMatchesGoldenBitForBit) {
  for (uint32_t dim : {12u, 1000u, 6912u}) {
    SCOPED_TRACE(dim);
    const uint32_t tokens = 3;
    const auto gate = random_floats(tokens * dim, dim + 3, 2.0f), up = random_floats(tokens * dim, dim + 4, 1.5f);
    const auto x = relu2_gate_cpu(gate, up);
    const GpuQuantized got = quantize_inputs({gate, up}, dim);
    for (size_t t = 0; t < tokens; ++t) {
      const QuantizedX want = quantize_cpu(std::span(x).subspan(t * dim, dim));
      ASSERT_EQ(got.s(t), want.s) << "token " << t;
      ASSERT_EQ(got.sum(t), want.sum) << "token " << t;
      for (size_t i = 0; i < dim; ++i) ASSERT_EQ(got.q(t, dim, i), want.q[i]) << "token " << t << " element " << i;
    }
  }
}

// With ffn_sub_norm in front: the normalized vector within FusedRmsNormMatchesGolden's bound of
// golden::rms_norm(relu2_gate(gate, up)), q exact against golden's quantizer of it.
TEST_F(QuantizeActivations, Relu2GateUpInputWithRmsNormMatchesGolden) {
  for (uint32_t dim : {128u, 6912u}) {
    SCOPED_TRACE(dim);
    const uint32_t tokens = 2;
    const auto gate = random_floats(tokens * dim, dim + 5, 2.0f), up = random_floats(tokens * dim, dim + 6, 1.5f);
    auto w = random_floats(dim, dim + 7, 0.5f);
    const auto x = relu2_gate_cpu(gate, up);
    const GpuQuantized got = quantize_inputs({gate, up}, dim, &w);
    for (size_t t = 0; t < tokens; ++t) {
      std::vector<float> norm(dim);
      golden::rms_norm(std::span(x).subspan(t * dim, dim), w, 1e-5f, norm);
      const std::span<const float> normalized = std::span(got.normalized).subspan(t * dim, dim);
      for (size_t i = 0; i < dim; ++i)
        ASSERT_NEAR(normalized[i], norm[i], 1e-5f * std::fabs(norm[i]) + 1e-30f) << "token " << t << " element " << i;
      const QuantizedX own = quantize_cpu(normalized);
      EXPECT_EQ(got.s(t), own.s) << "token " << t;
      EXPECT_EQ(got.sum(t), own.sum) << "token " << t;
      for (size_t i = 0; i < dim; ++i) ASSERT_EQ(got.q(t, dim, i), own.q[i]) << "token " << t << " element " << i;
    }
  }
}

// SiLU's exp is the device's (Vulkan: 3 + 2|x| ulp), not the host's: each element within a few
// ulp of golden::silu_gate, so s within that and every q within one step of golden's, the steps
// few (elements near a rounding boundary).
TEST_F(QuantizeActivations, SiluGateUpInputMatchesGoldenWithinOneStep) {
  for (uint32_t dim : {12u, 1000u, 6912u}) {
    SCOPED_TRACE(dim);
    const uint32_t tokens = 3;
    const auto gate = random_floats(tokens * dim, dim + 8, 4.0f), up = random_floats(tokens * dim, dim + 9, 1.5f);
    std::vector<float> x(gate.size());
    golden::silu_gate(gate, up, x);
    const GpuQuantized got = quantize_inputs({gate, up}, dim, nullptr, 1e-5f, ops::GateActivation::Silu);
    for (size_t t = 0; t < tokens; ++t) {
      const QuantizedX want = quantize_cpu(std::span(x).subspan(t * dim, dim));
      ASSERT_NEAR(got.s(t), want.s, 4e-6f * want.s) << "token " << t;
      uint32_t steps = 0;
      for (size_t i = 0; i < dim; ++i) {
        ASSERT_LE(std::abs(got.q(t, dim, i) - want.q[i]), 1) << "token " << t << " element " << i;
        steps += got.q(t, dim, i) != want.q[i];
      }
      EXPECT_LE(steps, dim / 100 + 1) << "token " << t;
    }
  }
}

}  // namespace
}  // namespace bdsl::test
