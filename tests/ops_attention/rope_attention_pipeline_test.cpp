// rope_kv_write feeding attention, as a layer uses them: the prefill path (one block of n tokens)
// and the decode path (one recorded graph replayed per token) must agree with each other and with
// the CPU reference (RoPE in double, K/V rounded to F16 as the cache stores them).
#include <cmath>

#include "golden/reference_ops.h"
#include "models/numerics/half_float.h"
#include "models/numerics/rope.h"
#include "ops/attention/attention_decode.h"
#include "ops/attention/attention_prefill.h"
#include "ops/attention/rope_kv_write.h"
#include "ops_test_util.h"

namespace bdsl::test {
namespace {

class RopeThenAttention : public OpsTest {};

TEST_F(RopeThenAttention, PrefillAndDecodeAgreeWithTheReference) {
  const ops::AttentionDims d{8, 2, 64};
  const uint32_t context = 64, n = 6, pos0 = 3;
  const float base = 500000.0f;
  const auto t = target();
  const uint32_t chunks = ops::attention_chunks(t, d, context), wg = ops::rope_kv_write_workgroup(t);
  const uint32_t rope_groups = ((d.n_heads + 2 * d.n_kv_heads) * d.head_dim / 4 + wg - 1) / wg;
  const auto q = random_floats(size_t(n) * d.q_width(), 1, 3.0f);
  const auto k = random_floats(size_t(n) * d.kv_width(), 2, 3.0f);
  const auto v = random_floats(size_t(n) * d.kv_width(), 3, 1.0f);
  // The cache before the block: positions 0..pos0-1 already written.
  const auto earlier = f16_rounded(random_floats(size_t(context) * d.kv_width(), 4, 1.0f));
  const auto earlier_v = f16_rounded(random_floats(size_t(context) * d.kv_width(), 5, 1.0f));

  // Reference.
  golden::MatrixF qm(n, d.q_width()), kc(context, d.kv_width()), vc(context, d.kv_width());
  qm.data = q;
  kc.data = earlier;
  vc.data = earlier_v;
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t h = 0; h < d.n_heads; ++h) golden::rope_neox(qm.row(i).subspan(h * d.head_dim, d.head_dim), pos0 + i, d.head_dim, base);
    for (uint32_t j = 0; j < d.kv_width(); ++j) {
      kc.at(pos0 + i, j) = k[size_t(i) * d.kv_width() + j];
      vc.at(pos0 + i, j) = numerics::f16_to_f32(numerics::f32_to_f16(v[size_t(i) * d.kv_width() + j]));
    }
    for (uint32_t h = 0; h < d.n_kv_heads; ++h) golden::rope_neox(kc.row(pos0 + i).subspan(h * d.head_dim, d.head_dim), pos0 + i, d.head_dim, base);
    for (uint32_t j = 0; j < d.kv_width(); ++j) kc.at(pos0 + i, j) = numerics::f16_to_f32(numerics::f32_to_f16(kc.at(pos0 + i, j)));
  }
  golden::MatrixF want;
  golden::attention(qm, kc, vc, pos0, {d.n_heads, d.n_kv_heads, d.head_dim}, want);

  rt::Pipeline rope = pipeline(ops::rope_kv_write(t, d, context));
  rt::Buffer table = buffer_of(numerics::rope_table(context, d.head_dim, base), "rope_table");
  // Prefill: the whole block in two dispatches.
  std::vector<float> prefill_out;
  {
    rt::Buffer step = step_buffer(0, pos0), qb = buffer_of(q, "q"), kb = buffer_of(k, "k"), vb = buffer_of(v, "v");
    rt::Buffer kcb = buffer_of(pack_f16(earlier), "k_cache"), vcb = buffer_of(pack_f16(earlier_v), "v_cache");
    const auto layout = ops::attention_prefill_layout(t, d);
    const auto grid = ops::attention_prefill_grid(d, layout, n);
    rt::Buffer partials(ctx(), ops::attention_prefill_partials_bytes(d, layout, n, grid[2]), {false, "partials"});
    rt::Buffer counters = buffer_of(std::vector<uint32_t>(ops::attention_prefill_counters_bytes(d, layout, n) / 4, 0),
                                    "counters");
    rt::Buffer out(ctx(), q.size() * 4, {false, "out"});
    rt::Pipeline attn = pipeline(ops::attention_prefill(t, d, context, layout));
    rt::Graph g(ctx());
    g.dispatch(rope, {step, table, qb, kb, vb, kcb, vcb}, rt::push(n), rt::Grid{rope_groups, n});
    g.dispatch(attn, {step, qb, kcb, vcb, partials, counters, out}, rt::push(n), rt::Grid{grid[0], grid[1], grid[2]});
    EXPECT_EQ(g.stats().steps, 2u);
    g.submit_and_wait();
    prefill_out = out.download<float>();
  }
  // Decode: one recording, replayed for each token with the step state and inputs rewritten.
  std::vector<float> decode_out(q.size());
  {
    rt::Buffer step = step_buffer(0, 0), qb(ctx(), d.q_width() * 4, {false, "q"});
    rt::Buffer kb(ctx(), d.kv_width() * 4, {false, "k"}), vb(ctx(), d.kv_width() * 4, {false, "v"});
    rt::Buffer kcb = buffer_of(pack_f16(earlier), "k_cache"), vcb = buffer_of(pack_f16(earlier_v), "v_cache");
    rt::Buffer partials(ctx(), ops::attention_partials_bytes(d, chunks, 1), {false, "partials"});
    rt::Buffer counters = buffer_of(std::vector<uint32_t>(d.n_kv_heads, 0), "counters");
    rt::Buffer out(ctx(), d.q_width() * 4, {false, "out"});
    rt::Pipeline attn = pipeline(ops::attention_decode(t, d, context, chunks));
    rt::Graph g(ctx());
    g.dispatch(rope, {step, table, qb, kb, vb, kcb, vcb}, rt::push(1u), rt::Grid{rope_groups, 1});
    g.dispatch(attn, {step, qb, kcb, vcb, partials, counters, out}, rt::push(), rt::Grid{d.n_kv_heads, chunks, 1});
    for (uint32_t i = 0; i < n; ++i) {
      step.upload(std::vector<ops::StepState>{{0, pos0 + i}});
      qb.upload(std::vector<float>(q.begin() + size_t(i) * d.q_width(), q.begin() + size_t(i + 1) * d.q_width()));
      kb.upload(std::vector<float>(k.begin() + size_t(i) * d.kv_width(), k.begin() + size_t(i + 1) * d.kv_width()));
      vb.upload(std::vector<float>(v.begin() + size_t(i) * d.kv_width(), v.begin() + size_t(i + 1) * d.kv_width()));
      g.submit_and_wait();
      const auto o = out.download<float>();
      std::copy(o.begin(), o.end(), decode_out.begin() + size_t(i) * d.q_width());
    }
  }
  // Tolerance 1e-4 absolute: the attention tolerance (2e-5) plus keys that may round to the
  // neighbouring F16 value when the device's turned k differs from the reference's by ~1e-7,
  // moving a score by up to |q| * 2^-11 (|q| <= 3 * sqrt(64)).
  for (size_t i = 0; i < q.size(); ++i) {
    ASSERT_NEAR(prefill_out[i], want.data[i], 1e-4) << "prefill, element " << i;
    ASSERT_NEAR(decode_out[i], want.data[i], 1e-4) << "decode, element " << i;
    ASSERT_NEAR(decode_out[i], prefill_out[i], 1e-5) << "decode vs prefill, element " << i;
  }
}

}  // namespace
}  // namespace bdsl::test
