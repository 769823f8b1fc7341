// ternary_matvec_qkv_rope against the two dispatches it replaces (ternary_matvec_qkv, then
// rope_kv_write): q, the K and V cache words written bit for bit the same, nothing else touched.
// Those two are each checked against the CPU reference (ternary_matvec_test, rope_kv_write_test).
// ternary_matmul_qkv_rope, the same for a batch of sequences, against ternary_matmul_qkv then
// rope_kv_write_sequences.
#include "golden/reference_ops.h"
#include "matrix_test.h"
#include "models/numerics/rope.h"
#include "ops/attention/rope_kv_write.h"
#include "ops/common/step_state.h"
#include "ops/ternary/ternary_matmul.h"
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

// Five tokens of four sequences (two of one sequence at consecutive positions, one at a position
// past the context, which writes no cache row) in tiles of 1 (the decode body: weights prefetched,
// word units where 512 columns allow them), of 2 (the last one half empty) and of 8: q and both
// caches the same bits as the two dispatches it replaces.
TEST_P(TernaryMatvecQkvRope, BatchOfSequencesSameBitsAsProjectionThenRope) {
  const ops::AttentionDims d{8, 2, 64};
  const uint32_t cols = 512, context = 16, tokens = 5, slots = 4;
  const bool normed = GetParam() == ops::MatvecInput::NormalizeInWorkgroup;
  const I2sWeights wq = random_i2s(d.q_width(), cols, 11), wk = random_i2s(d.kv_width(), cols, 12, 0.5f),
                   wv = random_i2s(d.kv_width(), cols, 13, 1.25f);
  std::vector<float> x;
  for (uint32_t t = 0; t < tokens; ++t) {
    const auto row = random_floats(cols, 20 + t, 3.0f);
    x.insert(x.end(), row.begin(), row.end());
  }
  const auto norm_weight = random_floats(cols, 5, 1.0f);
  std::vector<uint32_t> q_words, acts;
  for (uint32_t t = 0; t < tokens; ++t) {
    const QuantizedX qx = quantize_cpu(std::vector<float>(x.begin() + t * cols, x.begin() + (t + 1) * cols));
    const auto w = qx.words(), a = qx.act();
    q_words.insert(q_words.end(), w.begin(), w.end());
    acts.insert(acts.end(), a.begin(), a.end());
  }
  // (slot, pos): slot 1 twice, slot 3 past the context.
  const std::vector<std::pair<uint32_t, uint32_t>> at = {{0, 3}, {1, 9}, {1, 10}, {3, context}, {2, 15}};
  std::vector<ops::SequenceState> states(tokens);
  for (uint32_t t = 0; t < tokens; ++t) {
    states[t].pos = at[t].second;
    states[t].first_row = at[t].first * context;
  }
  rt::Buffer sequences = buffer_of(states, "sequences");
  rt::Buffer bq = buffer_of(wq.bytes, "w_q"), bk = buffer_of(wk.bytes, "w_k"), bv = buffer_of(wv.bytes, "w_v");
  rt::Buffer xb = normed ? buffer_of(x, "x") : buffer_of(q_words, "x_q");
  rt::Buffer second = normed ? buffer_of(norm_weight, "norm_weight") : buffer_of(acts, "x_act");
  rt::Buffer table = buffer_of(numerics::rope_table(context, d.head_dim, 10000.0f), "rope_table");
  const float eps = 1e-5f;
  const std::vector<uint32_t> empty(size_t(slots) * context * d.kv_words(), kUntouched);
  for (uint32_t tile : {1u, 2u, 8u}) {
    SCOPED_TRACE(testing::Message() << "tile " << tile);
    ops::MatmulOptions o;
    o.projection.input = GetParam();
    o.tokens_per_workgroup = tile;
    const ops::PlannedPipeline fused = ops::make_pipeline(ctx(), ops::plan_ternary_matmul_qkv_rope(target(), d, cols, context, o));
    const ops::PlannedPipeline qkv =
        ops::make_pipeline(ctx(), ops::plan_ternary_matmul_qkv(target(), d.q_width(), d.kv_width(), d.kv_width(), cols, o));
    const ops::PlannedPipeline rope = ops::make_pipeline(ctx(), ops::plan_rope_kv_write_sequences(target(), d, context));
    rt::Buffer q1 = output(tokens * d.q_width() * 4, "q"), k1 = output(tokens * d.kv_width() * 4, "k"),
               v1 = output(tokens * d.kv_width() * 4, "v");
    rt::Buffer kc1 = buffer_of(empty, "k_cache"), vc1 = buffer_of(empty, "v_cache");
    rt::Buffer q2 = output(tokens * d.q_width() * 4, "q"), kc2 = buffer_of(empty, "k_cache"), vc2 = buffer_of(empty, "v_cache");
    std::vector<rt::Arg> input = normed ? std::vector<rt::Arg>{{"x", xb}, {"norm_weight", second}}
                                        : std::vector<rt::Arg>{{"x_q", xb}, {"x_act", second}};
    const rt::PushConstants push = normed ? rt::push(eps, tokens) : rt::push(tokens);
    rt::Graph g(ctx());
    std::vector<rt::Arg> a = {{"w_q", bq}, {"w_k", bk}, {"w_v", bv}, {"y_q", q1}, {"y_k", k1}, {"y_v", v1}};
    a.insert(a.end(), input.begin(), input.end());
    qkv.dispatch(g, a, push, tokens);
    rope.dispatch(g, {{"sequences", sequences}, {"rope_table", table}, {"q", q1}, {"k", k1}, {"v", v1}, {"k_cache", kc1}, {"v_cache", vc1}},
                  rt::push(tokens), tokens);
    a = {{"w_q", bq}, {"w_k", bk}, {"w_v", bv}, {"sequences", sequences}, {"rope_table", table}, {"y_q", q2}, {"k_cache", kc2}, {"v_cache", vc2}};
    a.insert(a.end(), input.begin(), input.end());
    fused.dispatch(g, a, push, tokens);
    g.submit_and_wait();
    EXPECT_EQ(q2.download<uint32_t>(), q1.download<uint32_t>());
    EXPECT_EQ(kc2.download<uint32_t>(), kc1.download<uint32_t>());
    EXPECT_EQ(vc2.download<uint32_t>(), vc1.download<uint32_t>());
    const auto kc = kc2.download<uint32_t>();
    const size_t slot_words = size_t(context) * d.kv_words();
    EXPECT_TRUE(std::all_of(kc.begin() + 3 * slot_words, kc.end(), [](uint32_t w) { return w == kUntouched; }))
        << "slot 3 (a position past the context) has no row";
    EXPECT_NE(kc[(context + 10) * d.kv_words()], kUntouched) << "slot 1's second token's row";
  }
  // A kernel for steps of one token (step_tokens 1: token 0 a constant) gives the tile-of-one
  // kernel's bits for one token (the batch's last: slot 2, position 15), and refuses another count.
  const uint32_t t = tokens - 1;
  rt::Buffer record = buffer_of(std::vector<ops::SequenceState>{states[t]}, "sequence");
  rt::Buffer x1 = normed ? buffer_of(std::vector<float>(x.begin() + t * cols, x.begin() + (t + 1) * cols), "x")
                         : buffer_of(std::vector<uint32_t>(q_words.begin() + t * cols / 4, q_words.begin() + (t + 1) * cols / 4), "x_q");
  rt::Buffer second1 = normed ? buffer_of(norm_weight, "norm_weight")
                              : buffer_of(std::vector<uint32_t>(acts.begin() + 2 * t, acts.begin() + 2 * t + 2), "x_act");
  std::vector<std::vector<uint32_t>> results;
  for (uint32_t step_tokens : {0u, 1u}) {
    SCOPED_TRACE(testing::Message() << "step tokens " << step_tokens);
    ops::MatmulOptions o;
    o.projection.input = GetParam();
    o.tokens_per_workgroup = 1;
    o.step_tokens = step_tokens;
    const ops::PlannedPipeline fused = ops::make_pipeline(ctx(), ops::plan_ternary_matmul_qkv_rope(target(), d, cols, context, o));
    if (step_tokens == 1) EXPECT_THROW(fused.grid(2), std::invalid_argument);
    rt::Buffer q = output(d.q_width() * 4, "q"), kc = buffer_of(empty, "k_cache"), vc = buffer_of(empty, "v_cache");
    std::vector<rt::Arg> a = {{"w_q", bq}, {"w_k", bk}, {"w_v", bv}, {"sequences", record}, {"rope_table", table}, {"y_q", q},
                              {"k_cache", kc}, {"v_cache", vc}};
    if (normed)
      a.insert(a.end(), {{"x", x1}, {"norm_weight", second1}});
    else
      a.insert(a.end(), {{"x_q", x1}, {"x_act", second1}});
    rt::Graph g(ctx());
    fused.dispatch(g, a, normed ? rt::push(eps, 1u) : rt::push(1u), 1);
    g.submit_and_wait();
    results.push_back(q.download<uint32_t>());
    for (const rt::Buffer* b : {&kc, &vc}) {
      const auto words = b->download<uint32_t>();
      results.back().insert(results.back().end(), words.begin(), words.end());
    }
    EXPECT_NE(kc.download<uint32_t>(), empty) << "the token's cache row is written";
  }
  EXPECT_EQ(results[1], results[0]);
}

INSTANTIATE_TEST_SUITE_P(Inputs, TernaryMatvecQkvRope,
                         ::testing::Values(ops::MatvecInput::Quantized, ops::MatvecInput::NormalizeInWorkgroup),
                         [](const auto& param_info) {
                           return std::string(param_info.param == ops::MatvecInput::Quantized ? "Quantized" : "Normed");
                         });

}  // namespace
}  // namespace bdsl::test
