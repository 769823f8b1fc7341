// attention_decode and attention_prefill against golden::attention on the device, over an F16
// KV cache filled with random values (rather than thousands of decode steps).
#include <cmath>
#include <optional>

#include "golden/reference_ops.h"
#include "models/numerics/rope.h"
#include "ops/attention/attention_decode.h"
#include "ops/attention/attention_prefill.h"
#include "ops/attention/attention_prefill_coopmat.h"
#include "ops/attention/attention_split_kv.h"
#include "ops/attention/rope_kv_write.h"
#include "ops/common/step_state.h"
#include "ops/tuning.h"
#include "ops_test_util.h"

namespace bdsl::test {
namespace {

constexpr ops::AttentionDims kTiny{8, 2, 64};
constexpr ops::AttentionDims k2B{20, 5, 128};

class Attention : public OpsTest {
 protected:
  void decode_with_forced_chunk_counts();
  struct Cache {
    golden::MatrixF k, v;  // the F16 values as f32, for the reference
    rt::Buffer kb, vb;
  };
  Cache cache(const ops::AttentionDims& d, uint32_t context, uint64_t seed) {
    Cache c{golden::MatrixF(context, d.kv_width()), golden::MatrixF(context, d.kv_width()), {}, {}};
    c.k.data = f16_rounded(random_floats(c.k.data.size(), seed, 1.0f));
    c.v.data = f16_rounded(random_floats(c.v.data.size(), seed + 1, 1.0f));
    c.kb = buffer_of(pack_f16(c.k.data), "k_cache");
    c.vb = buffer_of(pack_f16(c.v.data), "v_cache");
    return c;
  }
  double prefill_error(const ops::AttentionDims& d, uint32_t context, uint32_t pos0, uint32_t n,
                       const ops::PrefillAttentionLayout& layout, uint32_t chunks = 0);
  double prefill_coopmat_error(const ops::AttentionDims& d, uint32_t context, uint32_t pos0, uint32_t n, uint32_t chunks = 0);
  // Largest |got - want| over every query token and head.
  static double max_error(const std::vector<float>& got, const golden::MatrixF& want) {
    double worst = 0;
    for (size_t i = 0; i < want.data.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - want.data[i])));
    return worst;
  }
};

// Tolerance 2e-5 absolute (outputs are convex combinations of |v| <= 1): the device sums the dot
// products and the exponentials in another order than the reference and rescales per chunk;
// each is an fp32 rounding chain of ~head_dim terms (~1e-6), and GPU exp may be a few ulp off.
// q is scaled to |q| <= 8 so scores reach ~+-20 and the softmax is peaked, not flat.
constexpr double kTolerance = 2e-5;

TEST_F(Attention, DecodeAtEarlyAndLatePositionsWithOneReplayedGraph) {
  struct Case { ops::AttentionDims dims; uint32_t context; std::vector<uint32_t> positions; };
  for (const Case& c : {Case{kTiny, 4096, {0, 1, 2, 100, 4095}}, Case{k2B, 4096, {0, 1, 2, 100, 4095}},
                        Case{{6, 3, 12}, 37, {0, 5, 36}}}) {
    const auto& d = c.dims;
    const uint32_t chunks = ops::attention_chunks(target(), d, c.context);
    Cache kv = cache(d, c.context, d.head_dim);
    auto q = f16_rounded(random_floats(d.q_width(), 5, 8.0f));  // q as rope_kv_write stores it
    rt::Buffer step = step_buffer(0, 0), qb = buffer_of(q, "q"), out(ctx(), d.q_width() * 4, {false, "out"});
    rt::Buffer partials(ctx(), ops::attention_partials_bytes(d, chunks, 1), {false, "partials"});
    rt::Buffer counters = buffer_of(std::vector<uint32_t>(d.n_kv_heads, 0), "counters");
    rt::Pipeline p = pipeline(ops::attention_decode(target(), d, c.context, chunks));
    rt::Graph g(ctx());
    g.dispatch(p, {step, qb, kv.kb, kv.vb, partials, counters, out}, rt::push(), rt::Grid{d.n_kv_heads, chunks, 1});
    golden::MatrixF qm(1, d.q_width());
    qm.data = q;
    for (uint32_t pos : c.positions) {  // the same recording, replayed with a new position
      ops::StepState s;
      s.pos = pos;
      step.upload(std::vector<ops::StepState>{s});
      g.submit_and_wait();
      golden::MatrixF want;
      golden::attention(qm, kv.k, kv.v, pos, {d.n_heads, d.n_kv_heads, d.head_dim}, want);
      EXPECT_LT(max_error(out.download<float>(), want), kTolerance) << "heads " << d.n_heads << " pos " << pos;
    }
    EXPECT_EQ(counters.download<uint32_t>(), std::vector<uint32_t>(d.n_kv_heads, 0)) << "counters left for replay";
  }
}

void Attention::decode_with_forced_chunk_counts() {
  const auto d = kTiny;
  const uint32_t context = 300;
  Cache kv = cache(d, context, 3);
  auto q = f16_rounded(random_floats(d.q_width(), 6, 8.0f));
  golden::MatrixF qm(1, d.q_width());
  qm.data = q;
  for (uint32_t chunks : {1u, 7u, 300u}) {
    for (uint32_t pos : {0u, 6u, 7u, 8u, 299u}) {
      rt::Buffer step = step_buffer(0, pos), qb = buffer_of(q, "q"), out(ctx(), d.q_width() * 4, {false, "out"});
      rt::Buffer partials(ctx(), ops::attention_partials_bytes(d, chunks, 1), {false, "partials"});
      rt::Buffer counters = buffer_of(std::vector<uint32_t>(d.n_kv_heads, 0), "counters");
      run(ops::attention_decode(target(), d, context, chunks), {step, qb, kv.kb, kv.vb, partials, counters, out},
          rt::push(), rt::Grid{d.n_kv_heads, chunks, 1});
      golden::MatrixF want;
      golden::attention(qm, kv.k, kv.v, pos, {d.n_heads, d.n_kv_heads, d.head_dim}, want);
      EXPECT_LT(max_error(out.download<float>(), want), kTolerance) << "chunks " << chunks << " pos " << pos;
    }
  }
}

TEST_F(Attention, DecodeWithForcedChunkCounts) { decode_with_forced_chunk_counts(); }

// The last workgroup's combine handed over through the Vulkan memory model (ops/common/handoff.h,
// off by default). Not on a CPU device: under the memory model lavapipe (Mesa 22.3) drops the
// code after the chunk loop, so the combine never runs (docs/driver-notes.md).
TEST_F(Attention, DecodeWithMemoryModelHandoffs) {
  if (ctx().info().type == rt::DeviceType::Cpu) GTEST_SKIP() << "lavapipe drops the code after a loop of shared loads under the memory model";
  if (!ctx().info().vulkan_memory_model) GTEST_SKIP() << "the device has no Vulkan memory model";
  ops::Tuning t = ops::tuning_for(target());
  t.memory_model_handoffs = true;
  const ops::ScopedTuning handoffs(t);
  decode_with_forced_chunk_counts();
}

// A KV head's query heads split over workgroups (SplitKvTuning::head_split): one chunk, chunks
// combined by the last workgroup of all the KV head's, and partials left for the consumer (those
// checked against the same split-free dispatch: the layout must not depend on the split).
TEST_F(Attention, DecodeWithTheHeadsOfAKvHeadSplitOverWorkgroups) {
  for (const auto& d : {kTiny, k2B}) {
    const uint32_t context = 1024, chunks = ops::attention_chunks(target(), d, context), defer = 4;
    Cache kv = cache(d, context, 11);
    auto q = f16_rounded(random_floats(d.q_width(), 12, 8.0f));
    golden::MatrixF qm(1, d.q_width());
    qm.data = q;
    for (uint32_t split : {2u, 4u}) {
      ops::SplitKvTuning t;
      t.head_split = split;
      t.defer_combine = defer;
      const uint32_t pass = ops::attention_pass(target(), d, t);
      for (uint32_t pos : {3u, pass + 5, 3 * pass + 1, context - 1}) {
        rt::Buffer qb = buffer_of(q, "q");
        auto run_split = [&](uint32_t s, uint32_t deferred, rt::Buffer& out, rt::Buffer& partials) {
          rt::Buffer step = step_buffer(0, pos);
          rt::Buffer counters = buffer_of(std::vector<uint32_t>(d.n_kv_heads, 0), "counters");
          ops::SplitKvTuning ts = t;
          ts.head_split = s;
          ts.defer_combine = deferred;
          run(ops::attention_split_kv("attention_split_test", target(), d, context, chunks, false, ts),
              {step, qb, kv.kb, kv.vb, partials, counters, out}, rt::push(), rt::Grid{d.n_kv_heads * s, chunks, 1});
          EXPECT_EQ(counters.download<uint32_t>(), std::vector<uint32_t>(d.n_kv_heads, 0)) << "counters left for replay";
        };
        auto partials_buffer = [&] {
          return buffer_of(std::vector<float>(ops::attention_partials_bytes(d, chunks, 1) / 4, 0.0f), "partials");
        };
        rt::Buffer out(ctx(), d.q_width() * 4, {false, "out"}), partials = partials_buffer();
        run_split(split, 0, out, partials);  // combined in the kernel
        golden::MatrixF want;
        golden::attention(qm, kv.k, kv.v, pos, {d.n_heads, d.n_kv_heads, d.head_dim}, want);
        EXPECT_LT(max_error(out.download<float>(), want), kTolerance) << "split " << split << " pos " << pos;
        // Deferred: the same partials, bit for bit, as one workgroup per KV head leaves.
        rt::Buffer out_split(ctx(), d.q_width() * 4, {false, "out"}), out_whole(ctx(), d.q_width() * 4, {false, "out"});
        rt::Buffer p_split = partials_buffer(), p_whole = partials_buffer();
        run_split(split, defer, out_split, p_split);
        run_split(1, defer, out_whole, p_whole);
        EXPECT_EQ(p_split.download<float>(), p_whole.download<float>()) << "split " << split << " pos " << pos;
      }
    }
    ops::SplitKvTuning bad;
    bad.head_split = 3;
    EXPECT_THROW(ops::attention_split_kv("attention_split_test", target(), d, context, chunks, false, bad), std::invalid_argument);
  }
}

// The chunks a deferring attention uses, as its consumer finds them, against the definition (equal
// chunks of whole passes: wanted = min(last / pass + 1, chunks), then the non-empty ones of
// length last / wanted + 1) at every position of a long context, where the shortcut applies
// (pass >= chunks) and where it does not.
TEST_F(Attention, ActiveChunksFollowTheirDefinitionAtEveryPosition) {
  constexpr uint32_t kPositions = 8192;
  for (const auto& [pass, chunks] : std::vector<std::pair<uint32_t, uint32_t>>{{128, 16}, {64, 4}, {16, 16}, {8, 16}, {3, 7}, {1, 5}}) {
    using namespace dsl;
    KernelBuilder k("active_chunks_" + std::to_string(pass) + "_" + std::to_string(chunks), {64, 1, 1});
    auto out = k.buffer<u32>("active", Access::Write);
    auto i = k.global_id().x();
    out[i] = ops::attention_active_chunks(i, pass, chunks);
    rt::Buffer ob(ctx(), kPositions * 4, {false, "active"});
    run(k.build(), {ob}, rt::push(), rt::Grid{kPositions / 64, 1, 1});
    const auto got = ob.download<uint32_t>();
    for (uint32_t last = 0; last < kPositions; ++last) {
      const uint32_t wanted = std::min(last / pass + 1, chunks), length = last / wanted + 1;
      ASSERT_EQ(got[last], last / length + 1) << "pass " << pass << ", chunks " << chunks << ", last " << last;
    }
  }
}

// One prefill block through attention_prefill with the given layout; the largest error against
// the reference over every token and head.
double Attention::prefill_error(const ops::AttentionDims& d, uint32_t context, uint32_t pos0, uint32_t n,
                                const ops::PrefillAttentionLayout& layout, uint32_t chunks) {
  Cache kv = cache(d, context, 17 + pos0);
  golden::MatrixF qm(n, d.q_width());
  qm.data = f16_rounded(random_floats(qm.data.size(), 8 + n, 8.0f));
  rt::Buffer step = step_buffer(0, pos0), qb = buffer_of(qm.data, "q");
  rt::Buffer out(ctx(), qm.data.size() * 4, {false, "out"});
  auto grid = ops::attention_prefill_grid(d, layout, n);
  if (chunks) grid[2] = chunks;
  rt::Buffer partials(ctx(), ops::attention_prefill_partials_bytes(d, layout, n, grid[2]), {false, "partials"});
  const uint64_t counter_words = ops::attention_prefill_counters_bytes(d, layout, n) / 4;
  rt::Buffer counters = buffer_of(std::vector<uint32_t>(counter_words, 0), "counters");
  run(ops::attention_prefill(target(), d, context, layout), {step, qb, kv.kb, kv.vb, partials, counters, out},
      rt::push(n), rt::Grid{grid[0], grid[1], grid[2]});
  EXPECT_EQ(counters.download<uint32_t>(), std::vector<uint32_t>(counter_words, 0)) << "counters left for replay";
  golden::MatrixF want;
  golden::attention(qm, kv.k, kv.v, pos0, {d.n_heads, d.n_kv_heads, d.head_dim}, want);
  return max_error(out.download<float>(), want);
}

// The same block through attention_prefill_coopmat (F16 tensor cores); chunks 0: the target's.
double Attention::prefill_coopmat_error(const ops::AttentionDims& d, uint32_t context, uint32_t pos0, uint32_t n,
                                        uint32_t chunks) {
  Cache kv = cache(d, context, 17 + pos0);
  golden::MatrixF qm(n, d.q_width());
  qm.data = f16_rounded(random_floats(qm.data.size(), 8 + n, 8.0f));
  rt::Buffer step = step_buffer(0, pos0), qb = buffer_of(qm.data, "q");
  rt::Buffer out(ctx(), qm.data.size() * 4, {false, "out"});
  const auto grid = ops::attention_prefill_coopmat_grid(target(), d, n, chunks);
  rt::Buffer partials(ctx(), ops::attention_prefill_coopmat_partials_bytes(d, n, grid[0] / d.n_kv_heads), {false, "partials"});
  const uint64_t counter_words = ops::attention_prefill_coopmat_counters_bytes(d, n) / 4;
  rt::Buffer counters = buffer_of(std::vector<uint32_t>(counter_words, 0), "counters");
  run(ops::attention_prefill_coopmat(target(), d, context), {step, qb, kv.kb, kv.vb, partials, counters, out}, rt::push(n),
      rt::Grid{grid[0], grid[1], grid[2]});
  EXPECT_EQ(counters.download<uint32_t>(), std::vector<uint32_t>(counter_words, 0)) << "counters left for replay";
  golden::MatrixF want;
  golden::attention(qm, kv.k, kv.v, pos0, {d.n_heads, d.n_kv_heads, d.head_dim}, want);
  return max_error(out.download<float>(), want);
}

// Blocks at position 0 and later, token counts that are not a multiple of the token tile, and
// blocks that span several K/V tiles with the causal edge inside a tile.
TEST_F(Attention, PrefillIsCausalOverTheBlock) {
  struct Case { ops::AttentionDims dims; uint32_t context, pos0, n; };
  for (const Case& c : {Case{kTiny, 512, 0, 9}, Case{k2B, 4096, 97, 5}, Case{k2B, 4096, 4090, 6},
                        Case{{6, 3, 12}, 40, 3, 37}, Case{k2B, 1024, 0, 100}, Case{k2B, 1024, 301, 77},
                        Case{kTiny, 4096, 0, 512}}) {
    const auto layout = ops::attention_prefill_layout(target(), c.dims);
    EXPECT_LT(prefill_error(c.dims, c.context, c.pos0, c.n, layout), kTolerance)
        << "heads " << c.dims.n_heads << " pos0 " << c.pos0 << " n " << c.n;
  }
}

// The tensor-core kernel's ways of working: its softmax weights lean or rounded, one or two
// subgroups per query head.
struct CoopWay {
  bool lean;
  uint32_t subgroups;
};
constexpr CoopWay kCoopWays[] = {{false, 1}, {true, 1}, {true, 2}, {false, 2}};
ops::Tuning with_way(const ops::OpTarget& target, CoopWay way) {
  ops::Tuning t = ops::tuning_for(target);
  t.prefill_coopmat_attention_lean_weights = way.lean;
  t.prefill_coopmat_attention_subgroups_per_head = way.subgroups;
  return t;
}

// On F16 tensor cores (where the device lists 16x16x16): blocks at position 0 and late, token
// counts that fill no tile, the causal edge inside a K/V tile, the 2B shape's 512-token block and
// one near the end of a long context, a head_dim of 64, groups of 4, 3 (K/V rows that do not
// divide among the workgroup) and 1; with the softmax weights as the reference forms them and lean,
// one and two subgroups per query head.
TEST_F(Attention, PrefillOnTensorCoresMatchesTheReference) {
  if (!ops::attention_prefill_coopmat_supported(target(), k2B))
    GTEST_SKIP() << "device " << ctx().info().name << " lists no F16 16x16x16 cooperative-matrix shape with subgroups of 32";
  struct Case { ops::AttentionDims dims; uint32_t context, pos0, n; };
  for (const CoopWay way : kCoopWays) {
    const ops::ScopedTuning weights(with_way(target(), way));
    for (const Case& c : {Case{k2B, 4096, 0, 512}, Case{k2B, 4096, 97, 5}, Case{k2B, 4096, 3584, 512}, Case{k2B, 1024, 301, 77},
                          Case{k2B, 4096, 4090, 6}, Case{kTiny, 512, 0, 9}, Case{kTiny, 4096, 33, 130},
                          Case{{6, 2, 64}, 512, 40, 50}, Case{{4, 4, 64}, 512, 7, 33}})
      EXPECT_LT(prefill_coopmat_error(c.dims, c.context, c.pos0, c.n), kTolerance)
          << "lean weights " << way.lean << " subgroups " << way.subgroups << " heads " << c.dims.n_heads << " pos0 " << c.pos0 << " n " << c.n;
  }
}

// The tensor-core kernel's position chunks, merged by the last workgroup: chunk counts that
// divide the K/V tiles and ones that do not, more chunks than a tile's K/V tiles (workgroups
// with nothing to do), rows whose positions all fall in the first chunk, a group of 3.
TEST_F(Attention, PrefillOnTensorCoresWithPositionChunks) {
  if (!ops::attention_prefill_coopmat_supported(target(), k2B))
    GTEST_SKIP() << "device " << ctx().info().name << " lists no F16 16x16x16 cooperative-matrix shape with subgroups of 32";
  struct Case { ops::AttentionDims dims; uint32_t context, pos0, n; };
  for (const CoopWay way : kCoopWays) {
    const ops::ScopedTuning weights(with_way(target(), way));
    for (uint32_t chunks : {2u, 3u, 4u, 16u})
      for (const Case& c : {Case{k2B, 4096, 0, 512}, Case{k2B, 1024, 301, 77}, Case{k2B, 4096, 4090, 6},
                            Case{kTiny, 4096, 33, 130}, Case{{6, 2, 64}, 512, 40, 50}, Case{{4, 2, 48}, 512, 20, 40}})
        EXPECT_LT(prefill_coopmat_error(c.dims, c.context, c.pos0, c.n, chunks), kTolerance)
            << "lean weights " << way.lean << " subgroups " << way.subgroups << " chunks " << chunks << " heads " << c.dims.n_heads << " head_dim "
            << c.dims.head_dim << " pos0 " << c.pos0 << " n " << c.n;
  }
}

// The chunks a block is recorded with follow its last token tile's K/V tiles, so that late
// blocks get more (host side: the rule, on any device).
TEST_F(Attention, TensorCoreChunksFollowTheBlocksLastPosition) {
  ops::Tuning t = ops::tuning_for(target());
  t.prefill_coopmat_attention_chunk_tiles = 0;
  {
    const ops::ScopedTuning none(t);
    EXPECT_EQ(ops::attention_prefill_coopmat_chunks(target(), 512, 3584), 1u) << "0: one chunk";
  }
  t.prefill_coopmat_attention_chunk_tiles = 4;
  const ops::ScopedTuning four(t);
  EXPECT_EQ(ops::attention_prefill_coopmat_chunks(target(), 512, 0), 4u);    // 16 K/V tiles
  EXPECT_EQ(ops::attention_prefill_coopmat_chunks(target(), 512, 512), 8u);  // 32
  EXPECT_EQ(ops::attention_prefill_coopmat_chunks(target(), 100, 0), 1u);    // 4
  EXPECT_EQ(ops::attention_prefill_coopmat_chunks(target(), 100, 29), 2u);   // 129 positions: 5
  EXPECT_EQ(ops::attention_prefill_coopmat_chunks(target(), 512, 3584), 16u) << "at most 16";
  EXPECT_EQ(ops::attention_prefill_coopmat_grid(target(), k2B, 512, 8)[0], 8 * k2B.n_kv_heads);
}

// Positions cut into chunks merged by the last workgroup: chunk counts that divide the K/V tiles
// and ones that do not, more chunks than tiles, rows whose positions all fall in one chunk.
TEST_F(Attention, PrefillWithPositionChunks) {
  const auto layout = ops::attention_prefill_layout(target(), kTiny);
  for (uint32_t chunks : {2u, 3u, 7u, 64u})
    for (auto [pos0, n] : {std::pair{0u, 40u}, std::pair{200u, 11u}, std::pair{3u, 1u}})
      EXPECT_LT(prefill_error(kTiny, 512, pos0, n, layout, chunks), kTolerance)
          << "chunks " << chunks << " pos0 " << pos0 << " n " << n;
  EXPECT_LT(prefill_error(k2B, 4096, 2000, 16, ops::attention_prefill_layout(target(), k2B)), kTolerance)
      << "the default chunks of a short late block";
}

// Other tilings than the target's default give the same answer: fewer lanes per token (several
// slices and keys per lane), odd token and key counts per tile.
TEST_F(Attention, PrefillWithOtherTilings) {
  const uint32_t sg = target().subgroup_size;
  for (uint32_t lanes : {1u, 2u, 8u}) {
    for (uint32_t keys : {1u, 3u}) {
      ops::PrefillAttentionLayout l;
      l.lanes = std::min(lanes, sg);
      l.keys_per_lane = keys;
      l.tokens = 3 * (sg / l.lanes);  // whole subgroups, an odd multiple where it fits
      if (ops::attention_prefill_shared_bytes(kTiny, l) > target().max_shared_bytes) l.tokens /= 3;
      for (const auto& d : {kTiny, ops::AttentionDims{6, 3, 12}})
        EXPECT_LT(prefill_error(d, 300, 5, 29, l), kTolerance)
            << "lanes " << l.lanes << " keys " << keys << " tokens " << l.tokens << " head_dim " << d.head_dim;
    }
  }
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

// Batched decode: RoPE with the cache write and attention for several sequences in one dispatch
// each (rope_kv_write_sequences, attention_decode_sequences) give every sequence, bit for bit,
// what rope_kv_write and attention_decode give it alone over its own cache, at its own position
// and rows; a sequence at a position past the context writes no cache row.
class Sequences : public OpsTest {};

TEST_F(Sequences, EachTokenGetsWhatItsSequenceGetsAlone) {
  const ops::AttentionDims d{8, 2, 64};
  const uint32_t context = 300, seqs = 3, chunks = ops::attention_chunks(target(), d, context);
  const std::vector<uint32_t> pos = {0, 299, 130};
  const uint64_t slot_words = uint64_t(context) * d.kv_words();
  const auto k_init = pack_f16(f16_rounded(random_floats(slot_words * seqs * 2, 11, 1.0f)));
  const auto v_init = pack_f16(f16_rounded(random_floats(slot_words * seqs * 2, 12, 1.0f)));
  const auto q = random_floats(size_t(seqs) * d.q_width(), 13, 8.0f);
  const auto k = random_floats(size_t(seqs) * d.kv_width(), 14, 1.0f), v = random_floats(size_t(seqs) * d.kv_width(), 15, 1.0f);
  const auto table = numerics::rope_table(context, d.head_dim, 10000.0f);
  rt::Buffer rope = buffer_of(table, "rope_table");
  const ops::SplitKvTuning tuning;

  // Together: the caches hold every sequence's rows (sequence s at rows s * context ..).
  std::vector<ops::SequenceState> states(seqs + 1);
  for (uint32_t s = 0; s < seqs; ++s) states[s] = {0, pos[s], s * context, 0};
  states[seqs] = {0, context, seqs * context, 0};  // past the context: writes nothing
  rt::Buffer sb = buffer_of(std::vector<uint32_t>(reinterpret_cast<const uint32_t*>(states.data()),
                                                  reinterpret_cast<const uint32_t*>(states.data()) + 4 * states.size()),
                            "sequences");
  const uint32_t n = seqs + 1;
  auto padded = [&](std::vector<float> rows, size_t width) {
    rows.resize(size_t(n) * width, 0.5f);
    return rows;
  };
  rt::Buffer qb = buffer_of(padded(q, d.q_width()), "q"), kb = buffer_of(padded(k, d.kv_width()), "k"),
             vb = buffer_of(padded(v, d.kv_width()), "v");
  rt::Buffer kc = buffer_of(k_init, "k_cache"), vc = buffer_of(v_init, "v_cache");
  rt::Buffer out(ctx(), uint64_t(n) * d.q_width() * 4, {false, "out"});
  rt::Buffer partials(ctx(), ops::attention_partials_bytes(d, chunks, n), {false, "partials"});
  rt::Buffer counters = buffer_of(std::vector<uint32_t>(n * d.n_kv_heads, 0), "counters");
  rt::Pipeline rope_all = pipeline(ops::rope_kv_write_sequences(target(), d, context));
  rt::Pipeline attend_all = pipeline(ops::attention_decode_sequences(target(), d, context, chunks, tuning));
  const uint32_t rope_groups = (d.n_heads + 2 * d.n_kv_heads) * d.head_dim / 4 / ops::rope_kv_write_workgroup(target()) + 1;
  rt::Graph together(ctx());
  together.dispatch(rope_all, {{"sequences", sb}, {"rope_table", rope}, {"q", qb}, {"k", kb}, {"v", vb}, {"k_cache", kc}, {"v_cache", vc}},
                    rt::push(n), rt::Grid{rope_groups, n});
  together.dispatch(attend_all, {{"sequences", sb}, {"q", qb}, {"k_cache", kc}, {"v_cache", vc}, {"partials", partials},
                                 {"counters", counters}, {"out", out}},
                    rt::push(n), rt::Grid{d.n_kv_heads, chunks, n});
  together.submit_and_wait();
  const auto got = out.download<float>();
  const auto k_after = kc.download<uint32_t>(), v_after = vc.download<uint32_t>();
  // The row past the context is untouched.
  EXPECT_TRUE(std::equal(k_after.begin() + seqs * slot_words, k_after.end(), k_init.begin() + seqs * slot_words));

  // Alone: each sequence with its own cache, the single-sequence kernels.
  rt::Pipeline rope_one = pipeline(ops::rope_kv_write(target(), d, context));
  rt::Pipeline attend_one = pipeline(ops::attention_decode(target(), d, context, chunks, tuning));
  for (uint32_t s = 0; s < seqs; ++s) {
    SCOPED_TRACE(testing::Message() << "sequence " << s << " at " << pos[s]);
    auto slot = [&](const std::vector<uint32_t>& all) {
      return std::vector<uint32_t>(all.begin() + s * slot_words, all.begin() + (s + 1) * slot_words);
    };
    rt::Buffer step = step_buffer(0, pos[s]);
    rt::Buffer q1 = buffer_of(std::vector<float>(q.begin() + s * d.q_width(), q.begin() + (s + 1) * d.q_width()), "q");
    rt::Buffer k1 = buffer_of(std::vector<float>(k.begin() + s * d.kv_width(), k.begin() + (s + 1) * d.kv_width()), "k");
    rt::Buffer v1 = buffer_of(std::vector<float>(v.begin() + s * d.kv_width(), v.begin() + (s + 1) * d.kv_width()), "v");
    rt::Buffer kc1 = buffer_of(slot(k_init), "k_cache"), vc1 = buffer_of(slot(v_init), "v_cache");
    rt::Buffer out1(ctx(), d.q_width() * 4, {false, "out"});
    rt::Buffer partials1(ctx(), ops::attention_partials_bytes(d, chunks, 1), {false, "partials"});
    rt::Buffer counters1 = buffer_of(std::vector<uint32_t>(d.n_kv_heads, 0), "counters");
    rt::Graph alone(ctx());
    alone.dispatch(rope_one, {step, rope, q1, k1, v1, kc1, vc1}, rt::push(1u), rt::Grid{rope_groups, 1});
    alone.dispatch(attend_one, {step, q1, kc1, vc1, partials1, counters1, out1}, rt::push(), rt::Grid{d.n_kv_heads, chunks, 1});
    alone.submit_and_wait();
    EXPECT_EQ(slot(k_after), kc1.download<uint32_t>());
    EXPECT_EQ(slot(v_after), vc1.download<uint32_t>());
    const auto want = out1.download<float>();
    EXPECT_EQ(std::vector<float>(got.begin() + s * d.q_width(), got.begin() + (s + 1) * d.q_width()), want);
  }
}

// Several chunks a workgroup (SplitKvTuning::chunks_per_workgroup, one after the other, each its
// own partial): every sequence's output the same bits as a workgroup a chunk, at positions of
// one chunk up to all of them, with the heads split or not; the counters are left zero.
TEST_F(Sequences, ChunksTakenByFewerWorkgroupsGiveTheSameBits) {
  const ops::AttentionDims d{8, 2, 64};
  const uint32_t context = 300, chunks = ops::attention_chunks(target(), d, context);
  ASSERT_GE(chunks, 3u);
  const std::vector<uint32_t> pos = {0, 299, 130, 40};
  const uint32_t n = uint32_t(pos.size());
  const uint64_t slot_words = uint64_t(context) * d.kv_words();
  rt::Buffer kc = buffer_of(pack_f16(f16_rounded(random_floats(slot_words * n * 2, 21, 1.0f))), "k_cache");
  rt::Buffer vc = buffer_of(pack_f16(f16_rounded(random_floats(slot_words * n * 2, 22, 1.0f))), "v_cache");
  rt::Buffer qb = buffer_of(f16_rounded(random_floats(size_t(n) * d.q_width(), 23, 8.0f)), "q");
  std::vector<uint32_t> states;
  for (uint32_t s = 0; s < n; ++s) states.insert(states.end(), {0u, pos[s], s * context, 0u});
  rt::Buffer sb = buffer_of(states, "sequences");
  for (uint32_t split : {1u, 2u}) {
    std::optional<std::vector<float>> first;
    for (uint32_t per : {1u, 2u, 3u, chunks}) {
      SCOPED_TRACE(testing::Message() << "split " << split << ", " << per << " chunks a workgroup");
      ops::SplitKvTuning tuning;
      tuning.head_split = split;
      tuning.chunks_per_workgroup = per;
      const ops::PlannedPipeline attend = ops::make_pipeline(ctx(), ops::plan_attention_decode_sequences(target(), d, context, chunks, tuning));
      EXPECT_EQ(attend.grid(n).y, (chunks + per - 1) / per);
      rt::Buffer out(ctx(), uint64_t(n) * d.q_width() * 4, {true, "out"});
      rt::Buffer partials(ctx(), ops::attention_partials_bytes(d, chunks, n), {false, "partials"});
      rt::Buffer counters = buffer_of(std::vector<uint32_t>(n * d.n_kv_heads, 0), "counters");
      rt::Graph g(ctx());
      attend.dispatch(g, {{"sequences", sb}, {"q", qb}, {"k_cache", kc}, {"v_cache", vc}, {"partials", partials}, {"counters", counters},
                          {"out", out}},
                      rt::push(n), n);
      g.submit_and_wait();
      EXPECT_EQ(counters.download<uint32_t>(), std::vector<uint32_t>(n * d.n_kv_heads, 0));
      const auto got = out.download<float>();
      if (!first) first = got;
      EXPECT_EQ(got, *first);
    }
  }
}

// A kernel for steps of one sequence (one_sequence: token 0 a constant) gives each sequence the
// batch kernel's bits from its own record (first rows past 0 included), with the heads split or
// not and the combine deferred or not; its grid refuses another count.
TEST_F(Sequences, TheOneSequenceKernelGivesTheBatchKernelsBits) {
  const ops::AttentionDims d{8, 2, 64};
  const uint32_t context = 300, chunks = ops::attention_chunks(target(), d, context);
  const std::vector<uint32_t> pos = {299, 0, 130};
  const uint32_t n = uint32_t(pos.size());
  const uint64_t slot_words = uint64_t(context) * d.kv_words();
  rt::Buffer kc = buffer_of(pack_f16(f16_rounded(random_floats(slot_words * n, 31, 1.0f))), "k_cache");
  rt::Buffer vc = buffer_of(pack_f16(f16_rounded(random_floats(slot_words * n, 32, 1.0f))), "v_cache");
  const std::vector<float> q = f16_rounded(random_floats(size_t(n) * d.q_width(), 33, 8.0f));
  rt::Buffer qb = buffer_of(q, "q");
  std::vector<uint32_t> states;
  for (uint32_t s = 0; s < n; ++s) states.insert(states.end(), {0u, pos[s], (n - 1 - s) * context, 0u});
  rt::Buffer sb = buffer_of(states, "sequences");
  for (uint32_t split : {1u, 2u})
    for (uint32_t defer : {0u, chunks}) {
      SCOPED_TRACE(testing::Message() << "split " << split << ", deferred " << defer);
      ops::SplitKvTuning tuning;
      tuning.head_split = split;
      tuning.defer_combine = defer;
      tuning.whole_pass_chunks = true;
      auto run = [&](const ops::PlannedPipeline& attend, const rt::Buffer& records, const rt::Buffer& queries, uint32_t tokens) {
        rt::Buffer out(ctx(), uint64_t(tokens) * d.q_width() * 4, {true, "out"});
        rt::Buffer partials(ctx(), ops::attention_partials_bytes(d, chunks, tokens), {true, "partials"});
        rt::Buffer counters = buffer_of(std::vector<uint32_t>(tokens * d.n_kv_heads, 0), "counters");
        out.fill(0);
        partials.fill(0);
        rt::Graph g(ctx());
        attend.dispatch(g, {{"sequences", records}, {"q", queries}, {"k_cache", kc}, {"v_cache", vc}, {"partials", partials},
                            {"counters", counters}, {"out", out}},
                        rt::push(tokens), tokens);
        g.submit_and_wait();
        return std::pair{out.download<float>(), partials.download<float>()};
      };
      const auto [all_out, all_partials] =
          run(ops::make_pipeline(ctx(), ops::plan_attention_decode_sequences(target(), d, context, chunks, tuning)), sb, qb, n);
      const ops::PlannedPipeline one = ops::make_pipeline(ctx(), ops::plan_attention_decode_sequences(target(), d, context, chunks, tuning, true));
      EXPECT_THROW(one.grid(2), std::invalid_argument);
      const size_t block = ops::attention_partials_bytes(d, chunks, 1) / 4;
      for (uint32_t s = 0; s < n; ++s) {
        SCOPED_TRACE(testing::Message() << "sequence " << s << " at " << pos[s]);
        rt::Buffer record = buffer_of(std::vector<uint32_t>(states.begin() + 4 * s, states.begin() + 4 * (s + 1)), "record");
        rt::Buffer query = buffer_of(std::vector<float>(q.begin() + s * d.q_width(), q.begin() + (s + 1) * d.q_width()), "query");
        const auto [got_out, got_partials] = run(one, record, query, 1);
        EXPECT_EQ(got_out, std::vector<float>(all_out.begin() + s * d.q_width(), all_out.begin() + (s + 1) * d.q_width()));
        EXPECT_EQ(got_partials, std::vector<float>(all_partials.begin() + s * block, all_partials.begin() + (s + 1) * block));
      }
    }
}

}  // namespace
}  // namespace bdsl::test
