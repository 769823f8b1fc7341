// ternary_matvec_qkv_rope against the two dispatches it replaces (ternary_matvec_qkv, then
// rope_kv_write): q, the K and V cache words written bit for bit the same, nothing else touched.
// Those two are each checked against the CPU reference (ternary_matvec_test, rope_kv_write_test).
#include "golden/reference_ops.h"
#include "matrix_test.h"
#include "models/numerics/rope.h"
#include "ops/attention/rope_kv_write.h"
#include "ops/common/step_state.h"
#include "ops/ternary/ternary_matvec.h"

namespace bdsl::test {
namespace {

constexpr uint32_t kUntouched = 0xdeadbeefu;

class TernaryMatvecQkvRope : public OpsMatrix, public ::testing::WithParamInterface<ops::MatvecInput> {
 protected:
  rt::Buffer step_at(uint32_t pos) {
    ops::StepState s;
    s.pos = pos;
    return buffer_of(std::vector<ops::StepState>{s}, "step");
  }
};

TEST_P(TernaryMatvecQkvRope, SameBitsAsProjectionThenRope) {
  const ops::AttentionDims d{8, 2, 64};
  const uint32_t cols = 256, context = 16;
  const bool normed = GetParam() == ops::MatvecInput::NormalizeInWorkgroup;
  const I2sWeights wq = random_i2s(d.q_width(), cols, 1), wk = random_i2s(d.kv_width(), cols, 2, 0.5f),
                   wv = random_i2s(d.kv_width(), cols, 3, 1.25f);
  const auto x = random_floats(cols, 4, 3.0f);
  const auto norm_weight = random_floats(cols, 5, 1.0f);
  const QuantizedX qx = quantize_cpu(x);
  rt::Buffer bq = buffer_of(wq.bytes, "w_q"), bk = buffer_of(wk.bytes, "w_k"), bv = buffer_of(wv.bytes, "w_v");
  rt::Buffer xb = normed ? buffer_of(x, "x") : buffer_of(qx.words(), "x_q");
  rt::Buffer second = normed ? buffer_of(norm_weight, "norm_weight") : buffer_of(qx.act(), "x_act");
  ops::MatvecOptions o;
  o.input = GetParam();
  const float eps = 1e-5f;
  rt::Buffer table = buffer_of(numerics::rope_table(context, d.head_dim, 10000.0f), "rope_table");
  rt::Pipeline fused = pipeline(ops::ternary_matvec_qkv_rope(target(), d, cols, context, o));
  rt::Pipeline qkv = pipeline(ops::ternary_matvec_qkv(target(), d.q_width(), d.kv_width(), d.kv_width(), cols, o));
  rt::Pipeline rope = pipeline(ops::rope_kv_write(target(), d, context));
  const std::vector<uint32_t> empty(size_t(context) * d.kv_words(), kUntouched);
  for (uint32_t pos : {0u, 1u, 7u, 15u, 16u}) {
    SCOPED_TRACE(testing::Message() << "pos " << pos);
    rt::Buffer step = step_at(pos);
    rt::Buffer q1 = output(d.q_width() * 4, "q"), k1 = output(d.kv_width() * 4, "k"), v1 = output(d.kv_width() * 4, "v");
    rt::Buffer kc1 = buffer_of(empty, "k_cache"), vc1 = buffer_of(empty, "v_cache");
    rt::Buffer q2 = output(d.q_width() * 4, "q"), kc2 = buffer_of(empty, "k_cache"), vc2 = buffer_of(empty, "v_cache");
    rt::Graph g(ctx());
    g.dispatch(qkv, {bq, bk, bv, xb, second, q1, k1, v1}, normed ? rt::push(eps) : rt::push(),
               rt::Grid{ops::ternary_matvec_workgroups(target(), d.q_width() + 2 * d.kv_width(), o)});
    g.dispatch(rope, {step, table, q1, k1, v1, kc1, vc1}, rt::push(1u),
               rt::Grid{(d.q_width() + 2 * d.kv_width()) / 4 / ops::rope_kv_write_workgroup(target()) + 1});
    g.dispatch(fused, {bq, bk, bv, xb, second, step, table, q2, kc2, vc2}, normed ? rt::push(eps) : rt::push(),
               rt::Grid{ops::ternary_matvec_qkv_rope_workgroups(target(), d, o)});
    g.submit_and_wait();
    EXPECT_EQ(q2.download<uint32_t>(), q1.download<uint32_t>());
    EXPECT_EQ(kc2.download<uint32_t>(), kc1.download<uint32_t>());
    EXPECT_EQ(vc2.download<uint32_t>(), vc1.download<uint32_t>());
    if (pos < context) {
      EXPECT_NE(kc2.download<uint32_t>(), empty);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Inputs, TernaryMatvecQkvRope,
                         ::testing::Values(ops::MatvecInput::Quantized, ops::MatvecInput::NormalizeInWorkgroup),
                         [](const auto& param_info) {
                           return std::string(param_info.param == ops::MatvecInput::Quantized ? "Quantized" : "Normed");
                         });

}  // namespace
}  // namespace bdsl::test
