// ternary_matvec (plain, residual, QKV, ReLU² and SiLU gate/up, norm or bare int8 in the workgroup) against
// golden::ternary_dot / golden::bitlinear on lavapipe, both dot-product variants forced.
#include "ops/ternary/ternary_matvec.h"

#include "matrix_test.h"
#include "ops/common/quantize_activations.h"

namespace bdsl::test {
namespace {

using ops::DotProduct;
using ops::MatvecOptions;

// After the exact int32 accumulator the only float operations are one int->float conversion
// (exact below 2^24), one division and one multiply, in golden's order. lavapipe rounds both
// correctly, and Vulkan allows 2.5 ulp for the division: 3 ulp of the result covers any device.
constexpr double kProjectionUlps = 3.0;

struct Case {
  uint32_t rows, cols;
};

class TernaryMatvec : public OpsMatrix, public ::testing::WithParamInterface<DotProduct> {
 protected:
  MatvecOptions options(bool acc = true, bool residual = false) {
    MatvecOptions o;
    o.dot = GetParam();
    o.write_accumulators = acc;
    o.add_residual = residual;
    return o;
  }
  MatvecOptions options_normed() {
    MatvecOptions o = options();
    o.input = ops::MatvecInput::NormalizeInWorkgroup;
    return o;
  }
  static float project(int32_t acc, float s, float scale) { return static_cast<float>(acc) / s * scale; }
  // A normed projection's outputs and accumulators (as bits, y then acc) built for the device's
  // subgroup size as the only one, and for any: random weights from `seed`, x and the norm
  // weight from seed + 1 and seed + 2.
  std::pair<std::vector<uint32_t>, std::vector<uint32_t>> normed_bits_fixed_and_not(uint32_t rows, uint32_t cols, uint32_t seed) {
    const I2sWeights w = random_i2s(rows, cols, seed);
    const auto x = random_floats(cols, seed + 1, 2.0f), nw = random_floats(cols, seed + 2, 0.5f);
    rt::Buffer wb = buffer_of(w.bytes, "w"), xb = buffer_of(x, "x"), nb = buffer_of(nw, "norm_weight");
    MatvecOptions o = options_normed();
    o.write_accumulators = true;
    std::vector<std::vector<uint32_t>> results;
    for (bool fixed : {true, false}) {
      ops::OpTarget t = target();
      t.subgroup_size_fixed = fixed;
      rt::Buffer y = output(rows * 4, "y"), acc = output(rows * 4, "acc");
      run(ops::ternary_matvec(t, rows, cols, o), {wb, xb, nb, y, acc}, ops::ternary_matvec_workgroups(t, rows, o), rt::push(1e-5f));
      auto a = y.download<uint32_t>(), b = acc.download<uint32_t>();
      a.insert(a.end(), b.begin(), b.end());
      results.push_back(a);
    }
    return {results[0], results[1]};
  }
};

TEST_P(TernaryMatvec, AccumulatorsExactAndOutputsWithinUlps) {
  const Case cases[] = {{1, 128}, {7, 128}, {33, 256}, {100, 384}, {2560, 2560}, {6912, 2560}, {2560, 6912}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.rows << "x" << c.cols);
    const I2sWeights w = random_i2s(c.rows, c.cols, c.rows * 31 + c.cols);
    const auto x = random_floats(c.cols, c.cols + 5, 2.0f);
    const QuantizedX qx = quantize_cpu(x);
    rt::Buffer wb = buffer_of(w.bytes, "w"), qb = buffer_of(qx.words(), "x_q"), ab = buffer_of(qx.act(), "x_act");
    rt::Buffer y = output(c.rows * 4, "y"), acc = output(c.rows * 4, "acc");
    run(ops::ternary_matvec(target(), c.rows, c.cols, options()), {wb, qb, ab, y, acc},
        ops::ternary_matvec_workgroups(target(), c.rows));
    const auto got_y = y.download<float>();
    const auto got_acc = acc.download<int32_t>();
    for (size_t r = 0; r < c.rows; ++r) {
      const int32_t want = golden::ternary_dot(w.m.row(r), qx.q);
      ASSERT_EQ(got_acc[r], want) << "row " << r;
      ASSERT_LE(ulps(got_y[r], project(want, qx.s, w.m.scale)), kProjectionUlps) << "row " << r;
    }
  }
}

TEST_P(TernaryMatvec, EndToEndAfterQuantizeMatchesBitlinear) {
  const uint32_t rows = 300, cols = 640;
  const I2sWeights w = random_i2s(rows, cols, 11);
  const auto x = random_floats(cols, 12, 4.0f);
  rt::Buffer xb = buffer_of(x, "x"), wb = buffer_of(w.bytes, "w");
  rt::Buffer q = output(cols, "x_q"), act = output(8, "x_act"), y = output(rows * 4, "y"), acc = output(rows * 4, "acc");
  rt::Pipeline quant = pipeline(ops::quantize_activations(target(), cols));
  rt::Pipeline mv = pipeline(ops::ternary_matvec(target(), rows, cols, options()));
  rt::Graph g(ctx());
  g.dispatch(quant, {xb, q, act}, rt::Grid{1});
  g.dispatch(mv, {wb, q, act, y, acc}, rt::Grid{ops::ternary_matvec_workgroups(target(), rows)});
  g.submit_and_wait();
  std::vector<float> want_y(rows);
  std::vector<int32_t> want_acc(rows);
  golden::bitlinear(w.m, x, want_y, want_acc);
  const auto got_y = y.download<float>();
  EXPECT_EQ(acc.download<int32_t>(), want_acc);
  for (size_t r = 0; r < rows; ++r) ASSERT_LE(ulps(got_y[r], want_y[r]), kProjectionUlps) << r;
}

// y = residual + proj: one more correctly rounded add on top of the projection's error.
TEST_P(TernaryMatvec, ResidualAddIntoTheStream) {
  const uint32_t rows = 2560, cols = 2560;
  const I2sWeights w = random_i2s(rows, cols, 21);
  const QuantizedX qx = quantize_cpu(random_floats(cols, 22));
  const auto residual = random_floats(rows, 23, 10.0f);
  rt::Buffer wb = buffer_of(w.bytes, "w"), qb = buffer_of(qx.words(), "x_q"), ab = buffer_of(qx.act(), "x_act");
  rt::Buffer y = buffer_of(residual, "y"), acc = output(rows * 4, "acc");
  run(ops::ternary_matvec(target(), rows, cols, options(true, true)), {wb, qb, ab, y, acc},
      ops::ternary_matvec_workgroups(target(), rows));
  const auto got = y.download<float>();
  for (size_t r = 0; r < rows; ++r) {
    const float proj = project(golden::ternary_dot(w.m.row(r), qx.q), qx.s, w.m.scale);
    const float want = residual[r] + proj;
    const float ulp_proj = std::nextafter(std::fabs(proj), INFINITY) - std::fabs(proj);
    ASSERT_LE(std::fabs(got[r] - want), kProjectionUlps * ulp_proj + std::fabs(want) * 0x1p-23f) << r;
  }
}

TEST_P(TernaryMatvec, FusedQkvCoversAllThreeTensors) {
  for (Case qkv : {Case{40, 256}, Case{2560, 2560}}) {
    // K and V not workgroup multiples (K even: rows_per_subgroup 2 must not split Q/K/V).
    const uint32_t q_rows = qkv.rows, kv_rows = qkv.rows / 4 + 2, cols = qkv.cols;
    SCOPED_TRACE(q_rows);
    I2sWeights ws[3] = {random_i2s(q_rows, cols, 1, 0.5f), random_i2s(kv_rows, cols, 2, 0.25f),
                        random_i2s(kv_rows, cols, 3, 2.0f)};
    const QuantizedX qx = quantize_cpu(random_floats(cols, 4));
    rt::Buffer w0 = buffer_of(ws[0].bytes, "wq"), w1 = buffer_of(ws[1].bytes, "wk"), w2 = buffer_of(ws[2].bytes, "wv");
    rt::Buffer qb = buffer_of(qx.words(), "x_q"), ab = buffer_of(qx.act(), "x_act");
    rt::Buffer y[3] = {output(q_rows * 4, "yq"), output(kv_rows * 4, "yk"), output(kv_rows * 4, "yv")};
    rt::Buffer a[3] = {output(q_rows * 4, "aq"), output(kv_rows * 4, "ak"), output(kv_rows * 4, "av")};
    run(ops::ternary_matvec_qkv(target(), q_rows, kv_rows, kv_rows, cols, options()),
        {w0, w1, w2, qb, ab, y[0], y[1], y[2], a[0], a[1], a[2]},
        ops::ternary_matvec_workgroups(target(), q_rows + 2 * kv_rows));
    for (int t = 0; t < 3; ++t) {
      const auto got_y = y[t].download<float>();
      const auto got_acc = a[t].download<int32_t>();
      for (size_t r = 0; r < ws[t].m.rows; ++r) {
        const int32_t want = golden::ternary_dot(ws[t].m.row(r), qx.q);
        ASSERT_EQ(got_acc[r], want) << "tensor " << t << " row " << r;
        ASSERT_LE(ulps(got_y[r], project(want, qx.s, ws[t].m.scale)), kProjectionUlps) << "tensor " << t << " row " << r;
      }
    }
  }
}

// act(gate) * up. ReLU²: gate and up each within kProjectionUlps, then three correctly rounded
// operations (max is exact): the product is within 2 * 3 + 1 + 2 ulp-units relative, < 1e-6.
// SiLU: Vulkan gives exp 3 + 2|x| ulp and the division 2.5; |gate| stays below 8 here, so the
// product is within ~30 ulp-units, < 4e-6 relative.
TEST_P(TernaryMatvec, FusedGateUpForEachActivation) {
  for (const auto& [act, tolerance] : {std::pair{ops::GateActivation::Relu2, 1e-6f}, std::pair{ops::GateActivation::Silu, 4e-6f}})
  for (Case c : {Case{37, 128}, Case{6912, 2560}}) {
    SCOPED_TRACE(c.rows);
    SCOPED_TRACE(ops::to_string(act));
    const I2sWeights wg = random_i2s(c.rows, c.cols, 5, 1.5f), wu = random_i2s(c.rows, c.cols, 6, 0.5f);
    const QuantizedX qx = quantize_cpu(random_floats(c.cols, 7));
    rt::Buffer g = buffer_of(wg.bytes, "w_gate"), u = buffer_of(wu.bytes, "w_up");
    rt::Buffer qb = buffer_of(qx.words(), "x_q"), ab = buffer_of(qx.act(), "x_act");
    // y has a guard band after its rows: the grid covers `rows` rows, not gate's plus up's.
    rt::Buffer y = buffer_of(std::vector<float>(c.rows + 512, 12345.0f), "y");
    rt::Buffer ag = output(c.rows * 4, "acc_gate"), au = output(c.rows * 4, "acc_up");
    run(ops::ternary_matvec_gate_up(target(), c.rows, c.cols, act, options()), {g, u, qb, ab, y, ag, au},
        ops::ternary_matvec_workgroups(target(), c.rows));
    const auto got = y.download<float>();
    const auto acc_g = ag.download<int32_t>(), acc_u = au.download<int32_t>();
    std::vector<float> gate(c.rows), up(c.rows), want(c.rows);
    for (size_t r = 0; r < c.rows; ++r) {
      const int32_t dg = golden::ternary_dot(wg.m.row(r), qx.q), du = golden::ternary_dot(wu.m.row(r), qx.q);
      ASSERT_EQ(acc_g[r], dg) << r;
      ASSERT_EQ(acc_u[r], du) << r;
      gate[r] = project(dg, qx.s, wg.m.scale);
      up[r] = project(du, qx.s, wu.m.scale);
    }
    if (act == ops::GateActivation::Relu2)
      golden::relu2_gate(gate, up, want);
    else
      golden::silu_gate(gate, up, want);
    for (size_t r = 0; r < c.rows; ++r) {
      const float exp_error = act == ops::GateActivation::Silu ? silu_exp_error(gate[r]) : 0.0f;
      ASSERT_NEAR(got[r], want[r], (tolerance + exp_error) * std::fabs(want[r]) + 1e-30f) << r << " gate " << gate[r];
    }
    for (size_t r = c.rows; r < got.size(); ++r) ASSERT_EQ(got[r], 12345.0f) << "written past the rows at " << r;
  }
}

// RMSNorm + quantize in every workgroup, then the projection: the norm's sum order differs from
// golden::rms_norm (see quantize_activations_test), so an element of q may differ by one step
// where x * s lands within a few ulp of a half. The accumulators are checked against golden's q
// allowing |acc - golden| <= (number of such near-tie elements) (each changes acc by at most 1),
// and exactly against the standalone fused quantize kernel's q, which runs the same code when
// given the same workgroup size.
TEST_P(TernaryMatvec, SubNormInTheWorkgroupMatchesNormThenBitlinear) {
  for (Case c : {Case{64, 768}, Case{2560, 6912}}) {
    SCOPED_TRACE(c.cols);
    const I2sWeights w = random_i2s(c.rows, c.cols, 8);
    const auto x = random_floats(c.cols, 9, 3.0f), nw = random_floats(c.cols, 10, 0.3f);
    rt::Buffer wb = buffer_of(w.bytes, "w"), xb = buffer_of(x, "x"), nb = buffer_of(nw, "norm_weight");
    rt::Buffer y = output(c.rows * 4, "y"), acc = output(c.rows * 4, "acc");
    MatvecOptions o = options();
    o.input = ops::MatvecInput::NormalizeInWorkgroup;
    run(ops::ternary_matvec(target(), c.rows, c.cols, o), {wb, xb, nb, y, acc},
        ops::ternary_matvec_workgroups(target(), c.rows, o), rt::push(1e-5f));
    // The standalone fused quantizer's q, built with the matvec's workgroup size so that it sums
    // in the same order.
    ops::QuantizeOptions qo;
    qo.rms_norm = true;
    qo.workgroup = ops::ternary_matvec_workgroup(target(), options_normed());
    rt::Buffer q = output(c.cols, "q"), act = output(8, "act");
    run(ops::quantize_activations(target(), c.cols, qo), {xb, nb, q, act}, 1, rt::push(1e-5f));
    const auto words = q.download<uint32_t>();
    const auto a = act.download<uint32_t>();
    QuantizedX gpu;
    gpu.q.resize(c.cols);
    for (size_t i = 0; i < c.cols; ++i) gpu.q[i] = static_cast<int8_t>(words[i / 4] >> (8 * (i % 4)));
    gpu.s = std::bit_cast<float>(a[0]);
    std::vector<float> norm(c.cols);
    golden::rms_norm(x, nw, 1e-5f, norm);
    const QuantizedX ref = quantize_cpu(norm);
    int near_ties = 0;
    for (size_t i = 0; i < c.cols; ++i) near_ties += gpu.q[i] != ref.q[i];
    const auto got_acc = acc.download<int32_t>();
    const auto got_y = y.download<float>();
    for (size_t r = 0; r < c.rows; ++r) {
      const int32_t want = golden::ternary_dot(w.m.row(r), gpu.q);
      ASSERT_EQ(got_acc[r], want) << r;
      ASSERT_LE(std::abs(want - golden::ternary_dot(w.m.row(r), ref.q)), near_ties) << r;
      ASSERT_LE(ulps(got_y[r], project(want, gpu.s, w.m.scale)), kProjectionUlps) << r;
    }
  }
}

// Without a sub-norm (`llama`): the workgroup quantizes x itself, exactly golden's
// quantize_activations (the same absmax, the correctly rounded 127 / absmax), and adds the
// projection into the residual stream. Every accumulator is exact.
TEST_P(TernaryMatvec, QuantizingInTheWorkgroupWithoutANormMatchesBitlinear) {
  for (Case c : {Case{64, 768}, Case{2560, 6912}, Case{50, 2560}}) {
    SCOPED_TRACE(c.cols);
    const I2sWeights w = random_i2s(c.rows, c.cols, 18);
    const auto x = random_floats(c.cols, 19, 3.0f), stream = random_floats(c.rows, 20, 1.0f);
    rt::Buffer wb = buffer_of(w.bytes, "w"), xb = buffer_of(x, "x"), y = buffer_of(stream, "y");
    rt::Buffer acc = output(c.rows * 4, "acc");
    MatvecOptions o = options(true, true);
    o.input = ops::MatvecInput::QuantizeInWorkgroup;
    run(ops::ternary_matvec(target(), c.rows, c.cols, o), {wb, xb, y, acc}, ops::ternary_matvec_workgroups(target(), c.rows, o));
    const QuantizedX ref = quantize_cpu(x);
    const auto got_acc = acc.download<int32_t>();
    const auto got_y = y.download<float>();
    for (size_t r = 0; r < c.rows; ++r) {
      const int32_t want = golden::ternary_dot(w.m.row(r), ref.q);
      ASSERT_EQ(got_acc[r], want) << r;
      // As ResidualAddIntoTheStream: the projection within 3 ulp (a GPU's division need not be
      // correctly rounded), then one rounded add.
      const float proj = project(want, ref.s, w.m.scale), want_y = stream[r] + proj;
      const float ulp_proj = std::nextafter(std::fabs(proj), INFINITY) - std::fabs(proj);
      ASSERT_LE(std::fabs(got_y[r] - want_y), kProjectionUlps * ulp_proj + std::fabs(want_y) * 0x1p-23f) << r;
    }
  }
}

// Several rows per subgroup share each activation load; rows counts that the group does not
// divide end in a partial group that reads the last row and writes nothing past the end.
TEST_P(TernaryMatvec, SeveralRowsPerSubgroup) {
  for (uint32_t rs : {1u, 3u, 4u}) {  // 2 is the default, used everywhere else
    for (Case c : {Case{7, 128}, Case{130, 256}, Case{2560, 2560}}) {
      SCOPED_TRACE(testing::Message() << "rows per subgroup " << rs << ", " << c.rows << "x" << c.cols);
      const I2sWeights w = random_i2s(c.rows, c.cols, c.rows + rs);
      const QuantizedX qx = quantize_cpu(random_floats(c.cols, rs));
      MatvecOptions o = options();
      o.rows_per_subgroup = rs;
      rt::Buffer wb = buffer_of(w.bytes, "w"), qb = buffer_of(qx.words(), "x_q"), ab = buffer_of(qx.act(), "x_act");
      rt::Buffer y = buffer_of(std::vector<float>(c.rows + 64, 12345.0f), "y"), acc = output(c.rows * 4, "acc");
      run(ops::ternary_matvec(target(), c.rows, c.cols, o), {wb, qb, ab, y, acc},
          ops::ternary_matvec_workgroups(target(), c.rows, o));
      const auto got_y = y.download<float>();
      const auto got_acc = acc.download<int32_t>();
      for (size_t r = 0; r < c.rows; ++r) {
        const int32_t want = golden::ternary_dot(w.m.row(r), qx.q);
        ASSERT_EQ(got_acc[r], want) << "row " << r;
        ASSERT_LE(ulps(got_y[r], project(want, qx.s, w.m.scale)), kProjectionUlps) << "row " << r;
      }
      for (size_t r = c.rows; r < got_y.size(); ++r) ASSERT_EQ(got_y[r], 12345.0f) << "written past the rows at " << r;
    }
  }
  // QKV with 4 rows per subgroup (Q and K rows multiples of 4, V not), and the refusal otherwise.
  const uint32_t cols = 256;
  I2sWeights ws[3] = {random_i2s(40, cols, 1), random_i2s(12, cols, 2), random_i2s(13, cols, 3)};
  const QuantizedX qx = quantize_cpu(random_floats(cols, 4));
  MatvecOptions o = options();
  o.rows_per_subgroup = 4;
  rt::Buffer w0 = buffer_of(ws[0].bytes, "wq"), w1 = buffer_of(ws[1].bytes, "wk"), w2 = buffer_of(ws[2].bytes, "wv");
  rt::Buffer qb = buffer_of(qx.words(), "x_q"), ab = buffer_of(qx.act(), "x_act");
  rt::Buffer y[3] = {output(40 * 4, "yq"), output(12 * 4, "yk"), output(13 * 4, "yv")};
  rt::Buffer a[3] = {output(40 * 4, "aq"), output(12 * 4, "ak"), output(13 * 4, "av")};
  run(ops::ternary_matvec_qkv(target(), 40, 12, 13, cols, o), {w0, w1, w2, qb, ab, y[0], y[1], y[2], a[0], a[1], a[2]},
      ops::ternary_matvec_workgroups(target(), 65, o));
  for (int t = 0; t < 3; ++t) {
    const auto got = a[t].download<int32_t>();
    for (size_t r = 0; r < ws[t].m.rows; ++r) ASSERT_EQ(got[r], golden::ternary_dot(ws[t].m.row(r), qx.q)) << t << " " << r;
  }
  EXPECT_THROW(ops::ternary_matvec_qkv(target(), 40, 13, 13, cols, o), std::invalid_argument);
  // relu2 gate/up with 4 rows per subgroup and 37 rows.
  const I2sWeights wg = random_i2s(37, cols, 5), wu = random_i2s(37, cols, 6);
  rt::Buffer g = buffer_of(wg.bytes, "w_gate"), u = buffer_of(wu.bytes, "w_up");
  rt::Buffer gy = buffer_of(std::vector<float>(37 + 64, 12345.0f), "y"), ag = output(37 * 4, "ag"), au = output(37 * 4, "au");
  run(ops::ternary_matvec_gate_up(target(), 37, cols, ops::GateActivation::Relu2, o), {g, u, qb, ab, gy, ag, au},
      ops::ternary_matvec_workgroups(target(), 37, o));
  const auto got_g = ag.download<int32_t>(), got_u = au.download<int32_t>();
  const auto got_y = gy.download<float>();
  for (size_t r = 0; r < 37; ++r) {
    ASSERT_EQ(got_g[r], golden::ternary_dot(wg.m.row(r), qx.q)) << r;
    ASSERT_EQ(got_u[r], golden::ternary_dot(wu.m.row(r), qx.q)) << r;
  }
  for (size_t r = 37; r < got_y.size(); ++r) ASSERT_EQ(got_y[r], 12345.0f) << r;
}

// attn_norm -> QKV and ffn_norm -> gate/up as one dispatch each: the in-workgroup norm in front
// of the fused kernels, checked exactly against the same-order standalone quantizer's q.
TEST_P(TernaryMatvec, NormInTheWorkgroupInFrontOfQkvAndGateUp) {
  const uint32_t cols = 640;
  const auto x = random_floats(cols, 51, 2.0f), nw = random_floats(cols, 52, 0.4f);
  rt::Buffer xb = buffer_of(x, "x"), nb = buffer_of(nw, "norm_weight");
  ops::QuantizeOptions qo;
  qo.rms_norm = true;
  qo.workgroup = ops::ternary_matvec_workgroup(target(), options_normed());
  rt::Buffer qw = output(cols, "q"), act = output(8, "act");
  run(ops::quantize_activations(target(), cols, qo), {xb, nb, qw, act}, 1, rt::push(1e-5f));
  const auto words = qw.download<uint32_t>();
  std::vector<int8_t> q(cols);
  for (size_t i = 0; i < cols; ++i) q[i] = static_cast<int8_t>(words[i / 4] >> (8 * (i % 4)));
  MatvecOptions o = options();
  o.input = ops::MatvecInput::NormalizeInWorkgroup;
  {
    I2sWeights ws[3] = {random_i2s(64, cols, 53), random_i2s(16, cols, 54), random_i2s(17, cols, 55)};
    rt::Buffer w0 = buffer_of(ws[0].bytes, "wq"), w1 = buffer_of(ws[1].bytes, "wk"), w2 = buffer_of(ws[2].bytes, "wv");
    rt::Buffer y[3] = {output(64 * 4, "yq"), output(16 * 4, "yk"), output(17 * 4, "yv")};
    rt::Buffer a[3] = {output(64 * 4, "aq"), output(16 * 4, "ak"), output(17 * 4, "av")};
    run(ops::ternary_matvec_qkv(target(), 64, 16, 17, cols, o), {w0, w1, w2, xb, nb, y[0], y[1], y[2], a[0], a[1], a[2]},
        ops::ternary_matvec_workgroups(target(), 97, o), rt::push(1e-5f));
    for (int t = 0; t < 3; ++t) {
      const auto got = a[t].download<int32_t>();
      for (size_t r = 0; r < ws[t].m.rows; ++r) ASSERT_EQ(got[r], golden::ternary_dot(ws[t].m.row(r), q)) << t << " " << r;
    }
  }
  {
    const I2sWeights wg = random_i2s(50, cols, 56), wu = random_i2s(50, cols, 57);
    rt::Buffer g = buffer_of(wg.bytes, "w_gate"), u = buffer_of(wu.bytes, "w_up");
    rt::Buffer y = output(50 * 4, "y"), ag = output(50 * 4, "ag"), au = output(50 * 4, "au");
    run(ops::ternary_matvec_gate_up(target(), 50, cols, ops::GateActivation::Relu2, o), {g, u, xb, nb, y, ag, au},
        ops::ternary_matvec_workgroups(target(), 50, o), rt::push(1e-5f));
    const auto got_g = ag.download<int32_t>(), got_u = au.download<int32_t>();
    for (size_t r = 0; r < 50; ++r) {
      ASSERT_EQ(got_g[r], golden::ternary_dot(wg.m.row(r), q)) << r;
      ASSERT_EQ(got_u[r], golden::ternary_dot(wu.m.row(r), q)) << r;
    }
  }
}

// On a device that runs one subgroup size, the loops for other sizes are left out of the kernel
// (OpTarget::subgroup_size_fixed): the kernel with them gives the same bits.
TEST_P(TernaryMatvec, CodeForOtherSubgroupSizesGivesTheSameBits) {
  const uint32_t rows = 160;
  const auto [fixed, general] = normed_bits_fixed_and_not(rows, 2560, 21);
  EXPECT_EQ(fixed, general);
  EXPECT_NE(fixed, std::vector<uint32_t>(2 * rows, 0u));
}

// The packed dot products take each 2-bit code field masked in place (scaled by 16, 16, 4 or 1)
// and shift the sums back at the end: exact accumulators, also where every code is 2.
TEST_P(TernaryMatvec, MaskedCodeFieldsGiveTheExactAccumulators) {
  const uint32_t rows = 96, cols = 2560;
  I2sWeights w = random_i2s(rows, cols, 31);
  std::fill_n(w.m.values.begin(), cols, int8_t{1});  // row 0: every code 2 (weight +1)
  w.bytes = models::i2s::pack(w.m.values, w.m.scale);
  const QuantizedX qx = quantize_cpu(random_floats(cols, 32, 2.0f));
  rt::Buffer wb = buffer_of(w.bytes, "w"), qb = buffer_of(qx.words(), "x_q"), ab = buffer_of(qx.act(), "x_act");
  rt::Buffer y = output(rows * 4, "y"), acc = output(rows * 4, "acc");
  run(ops::ternary_matvec(target(), rows, cols, options()), {wb, qb, ab, y, acc}, ops::ternary_matvec_workgroups(target(), rows));
  const auto got = acc.download<int32_t>();
  for (uint32_t r = 0; r < rows; ++r) ASSERT_EQ(got[r], golden::ternary_dot(w.m.row(r), qx.q)) << "row " << r;
}

// A normed decode projection reads its weights a word at a time (every lane busy in every pass)
// where the device runs the target's subgroup size, in chunks of four words otherwise: both give
// the same outputs and accumulators, for rows of 2,560 codes (whole words per lane) and 6,912
// (chunks either way: not a multiple of the subgroup in words).
TEST_P(TernaryMatvec, WordUnitsAndChunksGiveTheSameBits) {
  if (GetParam() != DotProduct::Packed) GTEST_SKIP() << "packed dot products only";
  for (const uint32_t cols : {2560u, 6912u}) {
    SCOPED_TRACE(cols);
    const uint32_t rows = 64;
    const auto [words, chunks] = normed_bits_fixed_and_not(rows, cols, cols + 41);  // words where they fit
    EXPECT_EQ(words, chunks);
    EXPECT_NE(words, std::vector<uint32_t>(2 * rows, 0u));
  }
}

INSTANTIATE_TEST_SUITE_P(Dot, TernaryMatvec, ::testing::Values(DotProduct::Packed, DotProduct::PlainInteger),
                         [](const auto& p) { return p.param == DotProduct::Packed ? "Packed" : "PlainInteger"; });

}  // namespace
}  // namespace bdsl::test
