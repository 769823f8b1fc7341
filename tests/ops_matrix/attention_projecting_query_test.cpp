// Decode attention that projects its own query (attention_decode_projecting_query) in one step
// with the K/V projection (ternary_matvec_kv_rope, no barrier between them), and the consumer
// that merges position pos into its partials (MatvecOptions::attention_partials with
// current_position): the query is ternary_matvec_qkv_rope's bit for bit, and the attention output
// the consumer used is golden::attention's over the cache with row pos written, at positions
// with no earlier row, one chunk, deferred chunks and attention's own combine, in one graph
// replayed position after position.
#include "golden/reference_ops.h"
#include "matrix_test.h"
#include "models/numerics/half_float.h"
#include "models/numerics/rope.h"
#include "ops/attention/attention_decode.h"
#include "ops/common/step_state.h"
#include "ops/ternary/ternary_matvec.h"

namespace bdsl::test {
namespace {

using AttentionProjectingQuery = OpsMatrix;

std::vector<uint32_t> random_f16_words(size_t n, uint32_t seed) {
  const auto v = random_floats(2 * n, seed, 0.5f);
  std::vector<uint32_t> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = numerics::f32_to_f16(v[2 * i]) | (uint32_t(numerics::f32_to_f16(v[2 * i + 1])) << 16);
  return w;
}

golden::MatrixF unpack_f16(const std::vector<uint32_t>& words, size_t rows, size_t cols) {
  golden::MatrixF m(rows, cols);
  for (size_t i = 0; i < words.size(); ++i) {
    m.data[2 * i] = numerics::f16_to_f32(uint16_t(words[i] & 0xffffu));
    m.data[2 * i + 1] = numerics::f16_to_f32(uint16_t(words[i] >> 16));
  }
  return m;
}

TEST_F(AttentionProjectingQuery, EqualsTheQkvKernelAndTheReferenceAtEveryKindOfPosition) {
  const uint32_t dim = 256, defer = 4;
  const float eps = 1e-5f;
  // Heads of 4 x the subgroup (32 on lavapipe's 8 lanes, 128 on 32) get their score at pos summed
  // over a subgroup; the others in a round of their own.
  const uint32_t fits = 4 * target().subgroup_size;
  for (const ops::AttentionDims d : {ops::AttentionDims{8, 2, 64}, ops::AttentionDims{20, 5, 128}, ops::AttentionDims{8, 4, fits}}) {
    for (uint32_t split : {1u, d.group()}) {
      SCOPED_TRACE(testing::Message() << "heads " << d.n_heads << " split " << split);
      ops::SplitKvTuning tuning;
      tuning.head_split = split;
      tuning.defer_combine = defer;
      const uint32_t pass = ops::attention_pass(target(), d, tuning, dim);
      const uint32_t context = 6 * pass + 8, chunks = ops::attention_chunks(target(), d, context);
      ASSERT_GT(chunks, defer + 1) << "the own-combine positions need more chunks than are deferred";
      // Weight scales that give |q| up to ~10 against cache values of ~0.5: a peaked softmax, not a one-hot one.
      const I2sWeights wq = random_i2s(d.q_width(), dim, 1, 0.3f), wk = random_i2s(d.kv_width(), dim, 2, 0.05f),
                       wv = random_i2s(d.kv_width(), dim, 3, 0.5f), wo = random_i2s(dim, d.q_width(), 4);
      rt::Buffer bq = buffer_of(wq.bytes, "w_q"), bk = buffer_of(wk.bytes, "w_k"), bv = buffer_of(wv.bytes, "w_v"),
                 bo = buffer_of(wo.bytes, "w_o");
      rt::Buffer x = buffer_of(random_floats(dim, 5, 2.0f), "x"), norm = buffer_of(random_floats(dim, 6, 1.0f), "attn_norm");
      rt::Buffer sub_norm = buffer_of(random_floats(d.q_width(), 7, 1.0f), "attn_sub_norm");
      rt::Buffer table = buffer_of(numerics::rope_table(context, d.head_dim, 10000.0f), "rope_table");
      const auto cache_init_k = random_f16_words(size_t(context) * d.kv_words(), 8);
      const auto cache_init_v = random_f16_words(size_t(context) * d.kv_words(), 9);
      rt::Buffer kc = buffer_of(cache_init_k, "k_cache"), vc = buffer_of(cache_init_v, "v_cache");
      rt::Buffer step = buffer_of(std::vector<ops::StepState>{ops::StepState{}}, "step");
      // NaN where nothing was written yet: slots no position uses must not leak into the merge.
      rt::Buffer partials = buffer_of(std::vector<uint32_t>(ops::attention_partials_bytes(d, chunks + 1, 1) / 4, 0x7fc00000u), "partials");
      rt::Buffer counters = buffer_of(std::vector<uint32_t>(d.n_kv_heads, 0), "counters");
      rt::Buffer q = output(d.q_width() * 4, "q"), unused = output(d.q_width() * 4, "attn"), used = output(d.q_width() * 4, "used");
      rt::Buffer y = output(dim * 4, "y");

      ops::MatvecOptions normed;
      normed.input = ops::MatvecInput::NormalizeInWorkgroup;
      ops::MatvecOptions consumer = normed;
      consumer.attention_partials = ops::AttentionPartialsInput{d, context, chunks, pass, defer, true};
      rt::Pipeline kv = pipeline(ops::ternary_matvec_kv_rope(target(), d, dim, context, normed));
      rt::Pipeline att = pipeline(ops::attention_decode_projecting_query(target(), d, dim, context, chunks, tuning));
      rt::Pipeline out = pipeline(ops::ternary_matvec(target(), dim, d.q_width(), consumer));
      rt::Graph g(ctx());
      g.dispatch(kv, {bk, bv, x, norm, step, table, kc, vc}, rt::push(eps), rt::Grid{ops::ternary_matvec_kv_rope_workgroups(target(), d, normed)});
      const uint32_t caches[] = {1, 2};
      g.dispatch(att, std::vector<rt::BufferSlice>{step, kc, vc, partials, counters, q, bq, x, norm, table}, rt::push(eps),
                 rt::Grid{d.n_kv_heads * split, chunks, 1}, caches);
      EXPECT_EQ(g.stats().barriers, 0u) << "the K/V projection and attention share a step";
      g.dispatch(out, {bo, unused, sub_norm, y, step, partials, used, q, kc, vc}, rt::push(eps),
                 rt::Grid{ops::ternary_matvec_workgroups(target(), dim)});

      // The reference query: the QKV kernel with RoPE, into caches of its own.
      rt::Pipeline qkv = pipeline(ops::ternary_matvec_qkv_rope(target(), d, dim, context, normed));
      rt::Buffer q_ref = output(d.q_width() * 4, "q_ref"), kc_ref = buffer_of(cache_init_k, "k_ref"), vc_ref = buffer_of(cache_init_v, "v_ref");
      rt::Graph reference(ctx());
      reference.dispatch(qkv, {bq, bk, bv, x, norm, step, table, q_ref, kc_ref, vc_ref}, rt::push(eps),
                         rt::Grid{ops::ternary_matvec_qkv_rope_workgroups(target(), d, normed)});

      for (uint32_t pos : {0u, 1u, 3u, pass - 1, pass, pass + 5, 3 * pass + 1, 5 * pass + 2, context - 1}) {
        SCOPED_TRACE(testing::Message() << "pos " << pos);
        ops::StepState s;
        s.pos = pos;
        step.upload(std::vector<ops::StepState>{s});
        g.submit_and_wait();
        reference.submit_and_wait();
        const auto got_q = q.download<float>();
        ASSERT_EQ(got_q, q_ref.download<float>()) << "the query, bit for bit";
        ASSERT_EQ(kc.download<uint32_t>(), kc_ref.download<uint32_t>()) << "the K row at pos";
        golden::MatrixF qm(1, d.q_width()), want;
        qm.data = got_q;
        golden::attention(qm, unpack_f16(kc.download<uint32_t>(), context, d.kv_width()),
                          unpack_f16(vc.download<uint32_t>(), context, d.kv_width()), pos,
                          {d.n_heads, d.n_kv_heads, d.head_dim}, want);
        const auto got = used.download<float>();
        double worst = 0, largest_q = 0;
        for (size_t i = 0; i < want.data.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - want.data[i])));
        for (float v : got_q) largest_q = std::max(largest_q, double(std::fabs(v)));
        EXPECT_LT(worst, 2e-5) << "largest |q| " << largest_q;
        EXPECT_EQ(counters.download<uint32_t>(), std::vector<uint32_t>(d.n_kv_heads, 0)) << "counters left for replay";
      }
    }
  }
}

TEST_F(AttentionProjectingQuery, RefusesAnUndeferredCombine) {
  ops::SplitKvTuning t;
  t.defer_combine = 0;
  EXPECT_THROW(ops::attention_decode_projecting_query(target(), {8, 2, 64}, 256, 64, 1, t), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::test
