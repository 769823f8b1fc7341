// Batched decode's deferred combine: attention_decode_sequences leaves a token's chunks to its
// consumer (SplitKvTuning::defer_combine): attn_output's norm prologue in a tile of one token
// (MatvecOptions::attention_partials) or attn_sub_norm's quantize (attention_output_quantize). A
// batch's buckets merge in either place, or take attention's own combine, so all must give the
// same bits: attention combining in the kernel, then the standalone RMSNorm + int8 and the
// quantized matmul.
#include <bit>
#include <cstring>
#include <string>

#include "models/formats/i2s.h"
#include "ops/attention/attention_decode.h"
#include "ops/attention/attention_output_quantize.h"
#include "ops/attention/attention_split_kv.h"
#include "ops/common/quantize_activations.h"
#include "ops/ternary/ternary_matmul.h"
#include "ops_test_util.h"

namespace bdsl::test {
namespace {

class DeferredCombine : public OpsTest {
 protected:
  static constexpr uint32_t kChunks = 4;
  // Attention combining its chunks itself: whole passes of 2 positions a row group, so that a few
  // passes give several chunks.
  static ops::SplitKvTuning combined() {
    ops::SplitKvTuning t;
    t.positions_per_pass = 2;
    t.whole_pass_chunks = true;
    return t;
  }
  // The same leaving them to the consumer, in a workgroup layout of its own.
  static ops::SplitKvTuning deferred(uint32_t head_split, uint32_t chunks_per_workgroup) {
    ops::SplitKvTuning t = combined();
    t.defer_combine = kChunks;
    t.head_split = head_split;
    t.chunks_per_workgroup = chunks_per_workgroup;
    return t;
  }
  // Sequence s at position pos[s] over its own random F16 cache rows, with a random query.
  struct Sequences {
    ops::AttentionDims d;
    uint32_t context, n;
    rt::Buffer kc, vc, q, records;
  };
  Sequences sequences(const ops::AttentionDims& d, uint32_t context, const std::vector<uint32_t>& pos, uint64_t seed) {
    const uint32_t n = uint32_t(pos.size());
    const uint64_t slot_words = uint64_t(context) * d.kv_words();
    std::vector<uint32_t> records;
    for (uint32_t s = 0; s < n; ++s) records.insert(records.end(), {0u, pos[s], s * context, 0u});
    return {d, context, n, buffer_of(pack_f16(f16_rounded(random_floats(slot_words * n * 2, seed, 1.0f))), "k_cache"),
            buffer_of(pack_f16(f16_rounded(random_floats(slot_words * n * 2, seed + 1, 1.0f))), "v_cache"),
            buffer_of(f16_rounded(random_floats(size_t(n) * d.q_width(), seed + 2, 8.0f)), "q"), buffer_of(records, "sequences")};
  }
  void attend(const Sequences& b, const ops::SplitKvTuning& tuning, const rt::Buffer& out, const rt::Buffer& partials) {
    const ops::PlannedPipeline attention =
        ops::make_pipeline(ctx(), ops::plan_attention_decode_sequences(target(), b.d, b.context, kChunks, tuning));
    rt::Buffer counters = buffer_of(std::vector<uint32_t>(b.n * b.d.n_kv_heads, 0), "counters");
    rt::Graph g(ctx());
    attention.dispatch(g, {{"sequences", b.records}, {"q", b.q}, {"k_cache", b.kc}, {"v_cache", b.vc}, {"partials", partials},
                           {"counters", counters}, {"out", out}},
                       rt::push(b.n), b.n);
    g.submit_and_wait();
  }
};

TEST_F(DeferredCombine, AttnOutputMergingThePartialsGivesTheBitsOfTheCombinedOutput) {
  const ops::AttentionDims d{16, 4, 64};  // attention's output is 1024 wide: attn_output's columns, 4 a quantizer invocation
  const uint32_t cols = d.q_width(), rows = 40, chunks = kChunks;
  const float eps = 1e-5f;
  const uint32_t pass = ops::attention_pass(target(), d, combined());
  const uint32_t context = chunks * pass + 5;
  // One chunk (written by attention), two, three and all four (merged by attn_output), up to the
  // last position.
  const std::vector<uint32_t> pos = {0, pass - 1, pass, 2 * pass + 3, 3 * pass + 1, context - 1};
  const uint32_t n = uint32_t(pos.size());
  const Sequences b = sequences(d, context, pos, 31);
  std::vector<int8_t> ternary(size_t(rows) * cols);
  golden::SplitMix64 rng(34);
  for (int8_t& v : ternary) v = int8_t(int(rng.next() % 3) - 1);
  rt::Buffer wb = buffer_of(models::i2s::pack(ternary, 0.75f), "w");
  rt::Buffer norm = buffer_of(random_floats(cols, 35, 2.0f), "norm_weight");
  const auto residual = random_floats(size_t(rows) * n, 36, 4.0f);
  ops::MatmulOptions o;
  o.projection.add_residual = true;
  o.projection.write_accumulators = true;

  // Apart: attention combines, the standalone quantizer, the quantized matmul.
  rt::Buffer out(ctx(), uint64_t(n) * cols * 4, {false, "out"});
  rt::Buffer partials(ctx(), ops::attention_partials_bytes(d, chunks, n), {false, "partials"});
  attend(b, combined(), out, partials);
  rt::Buffer q8(ctx(), uint64_t(n) * cols, {false, "x_q"}), act(ctx(), 8ull * n, {false, "x_act"});
  run(ops::quantize_activations(target(), cols, {true}), {out, norm, q8, act}, rt::push(eps), rt::Grid{n});
  rt::Buffer y_apart = buffer_of(residual, "y"), acc_apart(ctx(), 4ull * rows * n, {false, "acc"});
  {
    const ops::PlannedPipeline matmul = ops::make_pipeline(ctx(), ops::plan_ternary_matmul(target(), rows, cols, o));
    rt::Graph g(ctx());
    matmul.dispatch(g, {{"w", wb}, {"x_q", q8}, {"x_act", act}, {"y", y_apart}, {"acc_w", acc_apart}}, rt::push(n), n);
    g.submit_and_wait();
  }

  // Deferred: attention leaves 2..4 chunks as partials, attn_output merges them in its prologue.
  for (const auto [split, per] : {std::pair{1u, 1u}, std::pair{2u, 1u}, std::pair{1u, 2u}}) {
    SCOPED_TRACE(testing::Message() << "head split " << split << ", " << per << " chunks a workgroup");
    rt::Buffer out_d = buffer_of(std::vector<float>(size_t(n) * cols, -7.0f), "out");
    rt::Buffer partials_d(ctx(), ops::attention_partials_bytes(d, chunks, n), {false, "partials"});
    attend(b, deferred(split, per), out_d, partials_d);
    ops::MatmulOptions f = o;
    f.tokens_per_workgroup = 1;
    f.projection.input = ops::MatvecInput::NormalizeInWorkgroup;
    f.projection.attention_partials = ops::AttentionPartialsInput{d, context, chunks, pass, chunks};
    const ops::PlannedPipeline fused = ops::make_pipeline(ctx(), ops::plan_ternary_matmul(target(), rows, cols, f));
    rt::Buffer y = buffer_of(residual, "y"), acc(ctx(), 4ull * rows * n, {false, "acc"});
    rt::Graph g(ctx());
    fused.dispatch(g, {{"w", wb}, {"x", out_d}, {"norm_weight", norm}, {"y", y}, {"acc_w", acc}, {"attention_step", b.records},
                       {"attention_partials", partials_d}},
                   rt::push(eps, n), n);
    g.submit_and_wait();
    // attn_sub_norm's quantize merging them itself (ops::attention_output_quantize, the larger
    // buckets' step): the standalone quantizer's int8 words, scales and sums.
    for (bool rms_norm : {true, false}) {
      rt::Buffer mq(ctx(), uint64_t(n) * cols, {false, "q"}), ma(ctx(), 8ull * n, {false, "act"});
      const ops::PlannedPipeline merge = ops::make_pipeline(ctx(), ops::plan_attention_output_quantize(target(), *f.projection.attention_partials, rms_norm));
      std::vector<rt::Arg> args = {{"x", out_d}, {"q", mq}, {"act", ma}, {"attention_step", b.records}, {"attention_partials", partials_d}};
      if (rms_norm) args.push_back({"norm_weight", norm});
      rt::Graph mg(ctx());
      merge.dispatch(mg, args, rms_norm ? rt::push(eps) : rt::PushConstants{}, n);
      mg.submit_and_wait();
      if (rms_norm) {
        EXPECT_EQ(mq.download<uint32_t>(), q8.download<uint32_t>());
        EXPECT_EQ(ma.download<uint32_t>(), act.download<uint32_t>());
      } else {
        rt::Buffer pq(ctx(), uint64_t(n) * cols, {false, "q"}), pa(ctx(), 8ull * n, {false, "act"});
        run(ops::quantize_activations(target(), cols), {out, pq, pa}, rt::push(), rt::Grid{n});
        EXPECT_EQ(mq.download<uint32_t>(), pq.download<uint32_t>());
        EXPECT_EQ(ma.download<uint32_t>(), pa.download<uint32_t>());
      }
    }
    const auto got = y.download<float>(), want = y_apart.download<float>();
    const auto got_acc = acc.download<int32_t>(), want_acc = acc_apart.download<int32_t>();
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t r = 0; r < rows; ++r) {
        const size_t i = size_t(t) * rows + r;
        ASSERT_EQ(got_acc[i], want_acc[i]) << "token " << t << " at " << pos[t] << " row " << r;
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << "token " << t << " at " << pos[t] << " row " << r;
      }
  }
}

// The words a consumer merges (attention_word_loader, here in a kernel of the test's own) are the
// bits the attention kernel's own combine writes, for every token from one chunk to all of them
// and with either head split: the two merges are different shaders of the same arithmetic.
TEST_F(DeferredCombine, MergedWordsAreTheCombinedOutputsBits) {
  using namespace dsl;
  const ops::AttentionDims d{8, 2, 64};
  const uint32_t chunks = kChunks, width = d.q_width(), words = width / 4;
  const uint32_t pass = ops::attention_pass(target(), d, combined()), context = chunks * pass + 3;
  std::vector<uint32_t> pos;
  for (uint32_t p = 0; p < context; p += std::max(1u, pass / 3)) pos.push_back(p);
  pos.push_back(context - 1);
  const uint32_t n = uint32_t(pos.size());
  const Sequences b = sequences(d, context, pos, 41);
  rt::Buffer want(ctx(), uint64_t(n) * width * 4, {false, "out"});
  rt::Buffer scratch(ctx(), ops::attention_partials_bytes(d, chunks, n), {false, "partials"});
  attend(b, combined(), want, scratch);
  const auto combined_out = want.download<float>();

  for (const auto [split, per] : {std::pair{1u, 1u}, std::pair{4u, 1u}, std::pair{1u, 2u}}) {
    SCOPED_TRACE(testing::Message() << "head split " << split << ", " << per << " chunks a workgroup");
    rt::Buffer out = buffer_of(std::vector<float>(size_t(n) * width, -7.0f), "out");
    rt::Buffer partials(ctx(), ops::attention_partials_bytes(d, chunks, n), {false, "partials"});
    attend(b, deferred(split, per), out, partials);
    KernelBuilder k("merged_words", {64, 1, 1});
    auto x = k.buffer<f32>("x", Access::Read);
    auto step = k.buffer<u32>("sequences", Access::Read);
    auto parts = k.buffer<vec2>("partials", Access::Read);
    auto merged = k.buffer<f32>("merged", Access::Write);
    auto token = let("token", k.workgroup_id().y());
    auto word = let("word", k.workgroup_id().x() * 64u + k.local_index());
    const ops::AttentionPartialsInput input{d, context, chunks, pass, chunks};
    auto load = ops::attention_word_loader(k, input, x, step, parts, std::nullopt, k.workgroup_id().x(), 0, token);
    if_(word < words, [&] {
      const auto v = load(word);
      for (uint32_t j = 0; j < 4; ++j) merged[token * width + word * 4u + j] = v[j];
    });
    rt::Buffer got(ctx(), uint64_t(n) * width * 4, {false, "merged"});
    run(k.build(), {out, b.records, partials, got}, rt::push(), rt::Grid{(words + 63) / 64, n});
    const auto g = got.download<float>();
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t e = 0; e < width; ++e) {
        const size_t i = size_t(t) * width + e;
        ASSERT_EQ(std::bit_cast<uint32_t>(g[i]), std::bit_cast<uint32_t>(combined_out[i]))
            << "token " << t << " at " << pos[t] << " element " << e << ": " << g[i] << " for " << combined_out[i];
      }
  }
}

}  // namespace
}  // namespace bdsl::test
