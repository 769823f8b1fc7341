// decode_layer (attn_output, gate/up, ffn_down and the next QKV as phases of one dispatch, handed
// over by counters) against the same four standalone kernels behind barriers: the same bits in
// every output, over several submissions (the counters are numbered by epoch, never reset).
// The standalone kernels are checked against the CPU reference in their own tests.
#include "ops/experimental/decode_layer.h"

#include "golden/reference_ops.h"
#include "matrix_test.h"
#include "models/numerics/rope.h"
#include "ops/common/step_state.h"
#include "ops/experimental/phase_sync.h"

namespace bdsl::test {
namespace {

class DecodeLayer : public OpsMatrix {
 protected:
  static constexpr uint32_t kDim = 512, kFfn = 1536, kContext = 64;
  static constexpr ops::AttentionDims kHeads{8, 2, 64};

  void SetUp() override {
    OpsMatrix::SetUp();
    for (auto o : {&opts_.residual, &opts_.gate_up, &opts_.qkv}) o->input = ops::MatvecInput::NormalizeInWorkgroup;
    opts_.residual.add_residual = true;
    opts_.qkv.rows_per_subgroup = 4;
  }

  rt::Buffer floats(size_t n, uint32_t seed, const char* name, float scale = 1.0f) {
    return buffer_of(random_floats(n, seed, scale), name);
  }
  rt::Buffer weights(uint32_t rows, uint32_t cols, uint32_t seed, const char* name) {
    return buffer_of(random_i2s(rows, cols, seed).bytes, name);
  }
  void set_step(rt::Buffer& step, uint32_t pos, uint32_t epoch) {
    ops::StepState s;
    s.pos = pos;
    s.epoch = epoch;
    step.upload_bytes(std::as_bytes(std::span(&s, 1)));
  }

  ops::DecodeLayerOptions opts_;
};

// Handed over through coherent buffers, then through the Vulkan memory model (handoff buffers).
class DecodeLayerHandoff : public DecodeLayer, public testing::WithParamInterface<bool> {};

TEST_P(DecodeLayerHandoff, PhasesInOneDispatchEqualTheKernelsBehindBarriers) {
  if (!workgroups_start_in_order()) GTEST_SKIP() << "needs workgroups that start in order (LP_NUM_THREADS=0 on lavapipe)";
  opts_.memory_model = GetParam();
  if (opts_.memory_model && !ctx().info().vulkan_memory_model) GTEST_SKIP() << "the device has no Vulkan memory model";
  const auto t = target();
  const auto& d = kHeads;
  const ops::DecodeLayerShape shape{d, kDim, kFfn, kContext, true};
  rt::Buffer wo = weights(kDim, d.q_width(), 1, "attn_output"), wg = weights(kFfn, kDim, 2, "gate"),
             wu = weights(kFfn, kDim, 3, "up"), wd = weights(kDim, kFfn, 4, "down"), wq = weights(d.q_width(), kDim, 5, "q"),
             wk = weights(d.kv_width(), kDim, 6, "k"), wv = weights(d.kv_width(), kDim, 7, "v");
  rt::Buffer n1 = floats(d.q_width(), 8, "attn_sub_norm"), n2 = floats(kDim, 9, "ffn_norm"), n3 = floats(kFfn, 10, "ffn_sub_norm"),
             n4 = floats(kDim, 11, "attn_norm");
  const auto attn = random_floats(d.q_width(), 12, 2.0f), x0 = random_floats(kDim, 13, 3.0f);
  struct Outputs {
    rt::Buffer attn, x, ffn, q, k_cache, v_cache;
  };
  auto outputs = [&](const char* who) {
    const uint64_t cache = uint64_t{kContext} * d.kv_words() * 4;
    Outputs o{buffer_of(attn, who), buffer_of(x0, who), output(kFfn * 4, who), output(d.q_width() * 4, who),
              output(cache, who), output(cache, who)};
    o.k_cache.fill(0);
    o.v_cache.fill(0);
    return o;
  };
  Outputs sep = outputs("separate"), fused = outputs("fused");
  rt::Buffer step(ctx(), sizeof(ops::StepState), {true, "step"});
  rt::Buffer counters(ctx(), 4 * (ops::kPhaseCounterStride + ops::decode_layer_counter_words()), {true, "counters"});
  counters.upload(std::vector<uint32_t>(counters.size() / 4, 0u));

  const float eps = 1e-5f;
  rt::Buffer table = buffer_of(numerics::rope_table(kContext, d.head_dim, 10000.0f), "rope_table");
  const ops::Plan out = ops::plan_ternary_matvec(t, kDim, d.q_width(), opts_.residual);
  const ops::Plan gu = ops::plan_ternary_matvec_gate_up(t, kFfn, kDim, ops::GateActivation::Relu2, opts_.gate_up);
  const ops::Plan down = ops::plan_ternary_matvec(t, kDim, kFfn, opts_.residual);
  const ops::Plan qkv = ops::plan_ternary_matvec_qkv_rope(t, d, kDim, kContext, opts_.qkv);
  rt::Pipeline p_out = pipeline(out.kernel), p_gu = pipeline(gu.kernel), p_down = pipeline(down.kernel), p_qkv = pipeline(qkv.kernel);
  rt::Graph separate(ctx());
  separate.dispatch(p_out, {wo, sep.attn, n1, sep.x}, rt::push(eps), out.grid());
  separate.dispatch(p_gu, {wg, wu, sep.x, n2, sep.ffn}, rt::push(eps), gu.grid());
  separate.dispatch(p_down, {wd, sep.ffn, n3, sep.x}, rt::push(eps), down.grid());
  separate.dispatch(p_qkv, {wq, wk, wv, sep.x, n4, step, table, sep.q, sep.k_cache, sep.v_cache}, rt::push(eps), qkv.grid());
  EXPECT_EQ(separate.stats().steps, 4u);

  const ops::Plan layer = ops::plan_decode_layer(t, shape, opts_);
  rt::Pipeline p_layer = pipeline(layer.kernel);
  rt::Graph one(ctx());
  // The phases read and write the residual stream and the FFN activations through bindings of
  // their own, one buffer each: aliased on purpose (the phases hand off across the device), vouched for.
  const rt::BufferSlice layer_bindings[] = {step, counters, wo, fused.attn, n1, fused.x, wg, wu, fused.x, n2, fused.ffn, wd,
                                            fused.ffn, n3, fused.x, wq, wk, wv, fused.x, n4, table, fused.q, fused.k_cache,
                                            fused.v_cache};
  const uint32_t aliased[] = {8, 12, 14, 18};
  one.dispatch(p_layer, layer_bindings, rt::push(eps, ops::kPhaseCounterStride), layer.grid(), aliased);
  EXPECT_EQ(one.stats().dispatches, 1u);

  // Three tokens: the residual stream carries over, the cache fills at positions 0, 1, 2.
  for (uint32_t epoch = 1; epoch <= 3; ++epoch) {
    SCOPED_TRACE(testing::Message() << "submission " << epoch);
    set_step(step, epoch - 1, epoch);
    separate.submit_and_wait();
    one.submit_and_wait();
    EXPECT_EQ(fused.x.download<float>(), sep.x.download<float>());
    EXPECT_EQ(fused.ffn.download<float>(), sep.ffn.download<float>());
    EXPECT_EQ(fused.q.download<float>(), sep.q.download<float>());
    EXPECT_EQ(fused.k_cache.download<uint32_t>(), sep.k_cache.download<uint32_t>());
    EXPECT_EQ(fused.v_cache.download<uint32_t>(), sep.v_cache.download<uint32_t>());
    const auto c = counters.download<uint32_t>();
    EXPECT_EQ(c[ops::kPhaseError], 0u);
    EXPECT_EQ(c[ops::kPhaseCounterStride], epoch * ops::ternary_matvec_workgroups(t, kDim, opts_.residual)) << "attn_output's";
  }
}

INSTANTIATE_TEST_SUITE_P(Handoffs, DecodeLayerHandoff, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& i) { return i.param ? "MemoryModel" : "Coherent"; });

// A wait that gives up (here: the error word is already set, as after a timeout) lets every
// workgroup finish: no hang, and the word stays set for the host to see.
TEST_F(DecodeLayer, AGivenUpWaitFinishesTheDispatch) {
  const auto t = target();
  const ops::DecodeLayerShape shape{kHeads, kDim, kFfn, kContext, false};
  const auto& d = kHeads;
  rt::Buffer wo = weights(kDim, d.q_width(), 1, "attn_output"), wg = weights(kFfn, kDim, 2, "gate"),
             wu = weights(kFfn, kDim, 3, "up"), wd = weights(kDim, kFfn, 4, "down");
  rt::Buffer n1 = floats(d.q_width(), 8, "n1"), n2 = floats(kDim, 9, "n2"), n3 = floats(kFfn, 10, "n3");
  rt::Buffer attn = floats(d.q_width(), 12, "attn"), x = floats(kDim, 13, "x"), ffn = output(kFfn * 4, "ffn");
  rt::Buffer step(ctx(), sizeof(ops::StepState), {true, "step"});
  set_step(step, 0, 7);  // the counters are still at zero: no wait could be satisfied
  rt::Buffer counters(ctx(), 4 * (ops::kPhaseCounterStride + ops::decode_layer_counter_words()), {true, "counters"});
  std::vector<uint32_t> words(counters.size() / 4, 0u);
  words[ops::kPhaseError] = 1;
  counters.upload(words);
  rt::Pipeline p = pipeline(ops::decode_layer(t, shape, opts_, /*spin_limit=*/64));
  rt::Graph g(ctx());
  const rt::BufferSlice bindings[] = {step, counters, wo, attn, n1, x, wg, wu, x, n2, ffn, wd, ffn, n3, x};
  const uint32_t aliased[] = {8, 12, 14};  // as above: the phases' own bindings of one buffer
  g.dispatch(p, bindings, rt::push(1e-5f, ops::kPhaseCounterStride), rt::Grid{ops::decode_layer_workgroups(t, shape, opts_)},
             aliased);
  g.submit_and_wait();
  EXPECT_EQ(counters.download<uint32_t>(0, 1)[0], 1u);
}

}  // namespace
}  // namespace bdsl::test
