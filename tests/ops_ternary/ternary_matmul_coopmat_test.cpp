// ternary_matmul_coopmat (prefill on tensor cores) against golden::ternary_dot per (token, row), on
// a device that lists an int8 cooperative-matrix shape (an H100: 16x8x32); skipped elsewhere
// (lavapipe has none). ternary_matmul_auto runs on every device: the plain variant where there
// are no tensor cores.
#include "ops/ternary/ternary_matmul_coopmat.h"

#include <array>
#include <cstdio>

#include "codegen/interface_of.h"
#include "ops/common/matrix_fragments.h"
#include "matrix_test.h"
#include "runtime/graph.h"
#include "runtime/pipeline.h"

namespace bdsl::test {
namespace {

// As ternary_matmul_test: exact accumulator, then one conversion, one division, one multiply.
constexpr double kProjectionUlps = 3.0;

float project(int32_t acc, float s, float scale) { return static_cast<float>(acc) / s * scale; }

class TernaryMatmulCoopmat : public OpsMatrix {
 protected:
  // Runs the variant ternary_matmul_auto picks with `engine` and checks every (token, row).
  void check(uint32_t rows, uint32_t cols, uint32_t tokens, ops::MatmulEngine engine, bool residual = false) {
    ops::MatmulOptions o;
    o.projection.write_accumulators = true;
    o.projection.add_residual = residual;
    EXPECT_EQ(ops::ternary_matmul_auto(target(), rows, cols, o, engine).cooperative,
              engine != ops::MatmulEngine::Subgroup && ops::ternary_matmul_coopmat_shape(target()));
    check(rows, cols, tokens, ops::plan_ternary_matmul_auto(target(), rows, cols, o, engine), residual);
  }
  // The tensor-core kernel with a given tile shape (on the target as probed: register_operands).
  void check(uint32_t rows, uint32_t cols, uint32_t tokens, ops::CoopMatmulOptions o, bool residual = false) {
    o.write_accumulators = true;
    o.add_residual = residual;
    SCOPED_TRACE(testing::Message() << "subgroups " << o.row_subgroups << "x" << o.token_subgroups << " tiles "
                                    << o.row_tiles << "x" << o.token_tiles << (o.double_buffer ? " double buffer" : "")
                                    << (o.register_operands ? " register operands" : ""));
    check(rows, cols, tokens, ops::plan_ternary_matmul_coopmat(probed(), rows, cols, o), residual);
  }
  // The device's target with what the fragment probe finds (ops/common/matrix_fragments.h).
  ops::OpTarget probed() { return ops::with_probed_fragments(ctx(), target()); }
  void check(uint32_t rows, uint32_t cols, uint32_t tokens, const ops::Plan& m, bool residual) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols << " tokens " << tokens << (residual ? " residual" : ""));
    const I2sWeights w = random_i2s(rows, cols, rows + cols);
    const Tokens x = quantize_tokens(tokens, cols, cols + tokens, 7);
    const auto before = random_floats(size_t(rows) * tokens, 5, 4.0f);
    rt::Buffer wb = buffer_of(w.bytes, "w"), qb = buffer_of(x.words, "x_q"), ab = buffer_of(x.act, "x_act");
    rt::Buffer y = residual ? buffer_of(before, "y") : output(uint64_t(rows) * tokens * 4, "y");
    rt::Buffer acc = output(uint64_t(rows) * tokens * 4, "acc");
    run2d(m.kernel, {wb, qb, ab, y, acc}, m.grid(tokens).x, m.grid(tokens).y, rt::push(tokens));
    const auto got_y = y.download<float>();
    const auto got_acc = acc.download<int32_t>();
    for (uint32_t t = 0; t < tokens; ++t)
      for (uint32_t r = 0; r < rows; ++r) {
        const size_t at = size_t(t) * rows + r;
        const int32_t want = golden::ternary_dot(w.m.row(r), x.q[t].q);
        ASSERT_EQ(got_acc[at], want) << "token " << t << " row " << r;
        const float proj = project(want, x.q[t].s, w.m.scale);
        if (!residual) {
          ASSERT_LE(ulps(got_y[at], proj), kProjectionUlps) << "token " << t << " row " << r;
        } else {  // as ternary_matmul_test: the projection's 3 ulp, then one rounded add
          const float ulp_proj = std::nextafter(std::fabs(proj), INFINITY) - std::fabs(proj);
          const float want_y = before[at] + proj;
          ASSERT_LE(std::fabs(got_y[at] - want_y), kProjectionUlps * ulp_proj + std::fabs(want_y) * 0x1p-23f)
              << "token " << t << " row " << r;
        }
      }
  }
  // The reduction split between workgroups (k_splits): the same accumulators and outputs, bit for
  // bit, as one workgroup a tile, also with a residual; replayed, so the scratch must be left zero
  // by each dispatch.
  void expect_split_gives_the_same_bits(uint32_t rows, uint32_t cols, uint32_t tokens,
                                        ops::CoopMatmulOptions whole, uint32_t splits) {
    for (bool residual : {false, true}) {
      SCOPED_TRACE(testing::Message() << rows << "x" << cols << " tokens " << tokens << " splits " << splits
                                      << (residual ? " residual" : ""));
      whole.write_accumulators = true;
      whole.add_residual = residual;
      ops::CoopMatmulOptions split = whole;
      split.k_splits = splits;
      const ops::Plan pw = ops::plan_ternary_matmul_coopmat(target(), rows, cols, whole);
      const ops::Plan ps = ops::plan_ternary_matmul_coopmat(target(), rows, cols, split);
      ASSERT_EQ(ps.grid(tokens).z, splits);
      const I2sWeights w = random_i2s(rows, cols, rows + cols + splits);
      const Tokens x = quantize_tokens(tokens, cols, cols + tokens, 7);
      const auto before = random_floats(size_t(rows) * tokens, 5, 4.0f);
      rt::Buffer wb = buffer_of(w.bytes, "w"), qb = buffer_of(x.words, "x_q"), ab = buffer_of(x.act, "x_act");
      rt::Buffer yw = buffer_of(before, "y whole"), ys = buffer_of(before, "y split");
      rt::Buffer aw = output(uint64_t(rows) * tokens * 4, "acc whole"), as = output(uint64_t(rows) * tokens * 4, "acc split");
      const rt::Grid g = ps.grid(tokens);
      rt::Buffer totals = buffer_of(std::vector<int32_t>(size_t(rows) * tokens, 0), "totals");
      rt::Buffer tickets = buffer_of(std::vector<uint32_t>(size_t(g.x) * g.y, 0u), "tickets");
      rt::Pipeline p_whole = pipeline(pw.kernel), p_split = pipeline(ps.kernel);
      rt::Graph gw(ctx()), gs(ctx());
      gw.dispatch(p_whole, {wb, qb, ab, yw, aw}, rt::push(tokens), pw.grid(tokens));
      if (splits > 1)
        gs.dispatch(p_split, {wb, qb, ab, ys, as, totals, tickets}, rt::push(tokens), g);
      else
        gs.dispatch(p_split, {wb, qb, ab, ys, as}, rt::push(tokens), g);
      for (int replay = 0; replay < 2; ++replay) {
        gw.submit_and_wait();
        gs.submit_and_wait();
        ASSERT_EQ(as.download<int32_t>(), aw.download<int32_t>()) << "replay " << replay;
        ASSERT_EQ(ys.download<float>(), yw.download<float>()) << "replay " << replay;
        EXPECT_EQ(totals.download<int32_t>(), std::vector<int32_t>(size_t(rows) * tokens, 0)) << "totals left for the next";
        EXPECT_EQ(tickets.download<uint32_t>(), std::vector<uint32_t>(size_t(g.x) * g.y, 0u)) << "tickets left for the next";
      }
      const auto acc = as.download<int32_t>();
      for (uint32_t r = 0; r < rows; r += 37) ASSERT_EQ(acc[r], golden::ternary_dot(w.m.row(r), x.q[0].q)) << "row " << r;
    }
  }
  bool has_tensor_cores() { return ops::ternary_matmul_coopmat_shape(target()).has_value(); }
  std::string why_skipped() {
    return "device " + ctx().info().name + " lists no VK_NV_cooperative_matrix shape 16x8x32 or 16x16x32 i8*i8+i32 "
           "(lavapipe has no cooperative matrices): the plain ternary_matmul runs there instead";
  }
};

TEST_F(TernaryMatmulCoopmat, EveryTokenAndRowMatchesGolden) {
  if (!has_tensor_cores()) GTEST_SKIP() << why_skipped();
  struct Case {
    uint32_t rows, cols, tokens;
  };
  // Rows and tokens that fill no tile, one token, a real 2B shape and a token count past one tile row.
  for (Case c : {Case{7, 128, 1}, Case{100, 384, 5}, Case{64, 256, 32}, Case{33, 640, 45}, Case{2560, 2560, 13},
                 Case{6912, 2560, 70}, Case{2560, 6912, 33}})
    check(c.rows, c.cols, c.tokens, ops::MatmulEngine::CooperativeMatrix);
}

TEST_F(TernaryMatmulCoopmat, EveryTileShapeMatchesGolden) {
  if (!has_tensor_cores()) GTEST_SKIP() << why_skipped();
  // {row subgroups, token subgroups, row tiles, token tiles, double buffer}: the bench's shapes,
  // one subgroup alone, 3 subgroups (staging items that do not divide among the invocations), and
  // tiles whose accumulators leave through shared memory in two passes (128 x 128 and 256 x 64 in
  // the 48 KiB NVIDIA gives).
  for (auto [rs, ts, rt, tt, db] :
       {std::array<uint32_t, 5>{2, 2, 4, 4, 0}, {2, 1, 4, 8, 0}, {4, 1, 2, 8, 0}, {4, 1, 2, 4, 1}, {4, 2, 1, 4, 0},
        {4, 2, 1, 2, 0}, {4, 2, 1, 4, 1}, {2, 2, 2, 4, 1}, {1, 1, 1, 1, 0}, {1, 1, 1, 1, 1}, {3, 1, 1, 2, 1},
        {4, 2, 2, 8, 0}, {8, 1, 1, 16, 0}, {8, 1, 2, 8, 0}}) {
    ops::CoopMatmulOptions o;
    o.row_subgroups = rs, o.token_subgroups = ts, o.row_tiles = rt, o.token_tiles = tt, o.double_buffer = db != 0;
    check(100, 384, 45, o);
    check(640, 2560, 70, o);
  }
}

// A decode step's tiles. 54 blocks in 4 splits: shares of 14, 14, 14 and 12; 4 in 3: 2, 2 and none.
TEST_F(TernaryMatmulCoopmat, SplitReductionGivesTheSameBits) {
  if (!has_tensor_cores()) GTEST_SKIP() << why_skipped();
  for (auto [rows, cols, tokens, splits] : {std::array<uint32_t, 4>{640, 2560, 16, 4}, {2560, 6912, 33, 4},
                                            {100, 384, 9, 3}, {96, 384, 20, 2}, {100, 512, 9, 3}, {7, 128, 1, 1}})
    expect_split_gives_the_same_bits(rows, cols, tokens, ops::coop_tiles_for_step(target(), tokens), splits);
}

// A prompt's 128 x 128 tiles (their accumulators leave in two passes) split 2 and 3 ways, over
// token tiles that end inside a tile.
TEST_F(TernaryMatmulCoopmat, PromptTilesSplitTheirReductionToTheSameBits) {
  if (!has_tensor_cores()) GTEST_SKIP() << why_skipped();
  ops::CoopMatmulOptions tile;
  tile.row_subgroups = 4, tile.token_subgroups = 2, tile.row_tiles = 2, tile.token_tiles = 8;
  expect_split_gives_the_same_bits(640, 2560, 200, tile, 2);
  expect_split_gives_the_same_bits(2560, 6912, 130, tile, 3);
}

// The probe of where each invocation holds a 16x8x32 int8 product's elements: every element of A,
// B and C held by exactly one invocation; the order found, where there is one, puts each where
// PTX's fragments do. NVIDIA's tensor cores take PTX's fragments, so an NVIDIA device must hold
// them in some order. The probe's words are printed for a device that holds them otherwise.
TEST_F(TernaryMatmulCoopmat, FragmentProbeFindsEveryElementOnce) {
  if (!ops::target_has_probe_shape(target())) GTEST_SKIP() << why_skipped() << " (the probe needs 16x8x32 and subgroups of 32)";
  rt::Buffer out = output(32 * ops::kFragmentProbeWords * 4, "elements");
  run2d(ops::int8_fragments_probe(target()), {out}, 1, 1);
  const auto got = out.download<uint32_t>();
  std::array<std::vector<int>, 3> seen{std::vector<int>(16 * 32), std::vector<int>(32 * 8), std::vector<int>(16 * 8)};
  std::string table;
  for (uint32_t inv = 0; inv < 32; ++inv) {
    table += "\ninvocation " + std::to_string(inv) + ":";
    for (uint32_t i = 0; i < ops::kFragmentProbeWords; ++i) {
      const uint32_t w = got[inv * ops::kFragmentProbeWords + i], row = w >> 8, col = w & 0xffu;
      table += " " + std::to_string(row) + "," + std::to_string(col);
      const int m = i < 16 ? 0 : i < 24 ? 1 : 2;
      const uint32_t cols = m == 0 ? 32 : 8, rows = m == 1 ? 32 : 16;
      ASSERT_TRUE(row < rows && col < cols) << "invocation " << inv << " element " << i << ": " << row << ", " << col;
      ++seen[m][row * cols + col];
    }
  }
  for (const auto& s : seen)
    for (int n : s) ASSERT_EQ(n, 1) << table;
  const auto order = ops::int8_fragment_order(got);
  EXPECT_EQ(ops::probe_int8_fragments(ctx(), target()), order);
  if (order) {  // the order found, for the record: which of PTX's elements each element is
    std::string o = "order of PTX's elements held: a";
    for (uint32_t i : order->a) o += " " + std::to_string(i);
    o += ", b";
    for (uint32_t i : order->b) o += " " + std::to_string(i);
    o += ", c";
    for (uint32_t i : order->c) o += " " + std::to_string(i);
    std::printf("%s\n", o.c_str());
    for (uint32_t inv = 0; inv < 32; ++inv)
      for (uint32_t i = 0; i < 16; ++i)
        ASSERT_EQ(ops::ptx_fragment_a(inv, order->a[i]),
                  (ops::FragmentElement{got[inv * ops::kFragmentProbeWords + i] >> 8, got[inv * ops::kFragmentProbeWords + i] & 0xffu}));
  }
  if (ctx().info().name.find("NVIDIA") != std::string::npos) {
    EXPECT_TRUE(order.has_value()) << ctx().info().name << table;
  }
}

// The order read from the probe's words: PTX's own, a permutation the same for every invocation,
// and none where an invocation holds an element PTX's fragment of it does not.
TEST(Int8FragmentOrder, ReadFromTheProbesWords) {
  auto words_of = [](const ops::Int8FragmentOrder& o) {
    std::vector<uint32_t> w(32 * ops::kFragmentProbeWords);
    auto word = [](ops::FragmentElement e) { return (e.row << 8) | e.col; };
    for (uint32_t inv = 0; inv < 32; ++inv) {
      for (uint32_t i = 0; i < 16; ++i) w[inv * ops::kFragmentProbeWords + i] = word(ops::ptx_fragment_a(inv, o.a[i]));
      for (uint32_t i = 0; i < 8; ++i) w[inv * ops::kFragmentProbeWords + 16 + i] = word(ops::ptx_fragment_b(inv, o.b[i]));
      for (uint32_t i = 0; i < 4; ++i) w[inv * ops::kFragmentProbeWords + 24 + i] = word(ops::ptx_fragment_c(inv, o.c[i]));
    }
    return w;
  };
  const ops::Int8FragmentOrder ptx = ops::Int8FragmentOrder::ptx();
  EXPECT_EQ(ops::int8_fragment_order(words_of(ptx)), ptx);
  ops::Int8FragmentOrder swapped = ptx;
  std::swap(swapped.a[4], swapped.a[8]);
  std::swap(swapped.b[0], swapped.b[7]);
  std::swap(swapped.c[1], swapped.c[2]);
  EXPECT_EQ(ops::int8_fragment_order(words_of(swapped)), swapped);
  std::vector<uint32_t> w = words_of(ptx);
  std::swap(w[5 * ops::kFragmentProbeWords + 0], w[5 * ops::kFragmentProbeWords + 1]);  // one invocation apart
  EXPECT_FALSE(ops::int8_fragment_order(w).has_value());
  w = words_of(ptx);
  w[3] = (15u << 8) | 31u;  // invocation 0 holding an element that is not its own
  EXPECT_FALSE(ops::int8_fragment_order(w).has_value());
}

// Tiles whose subgroups read their operands into PTX's fragments (register_operands), with no
// shared memory: the same accumulators as golden, also with a residual; rows and tokens that fill
// no tile, odd tile counts, one subgroup alone.
TEST_F(TernaryMatmulCoopmat, RegisterOperandTilesMatchGolden) {
  if (!has_tensor_cores()) GTEST_SKIP() << why_skipped();
  if (!probed().int8_fragments) GTEST_SKIP() << "device " << ctx().info().name << " does not hold PTX's fragments";
  for (auto [rs, ts, rt, tt] : {std::array<uint32_t, 4>{4, 2, 2, 4}, {1, 1, 1, 1}, {2, 1, 4, 2}, {4, 2, 1, 2}, {3, 1, 3, 3}}) {
    ops::CoopMatmulOptions o;
    o.row_subgroups = rs, o.token_subgroups = ts, o.row_tiles = rt, o.token_tiles = tt, o.register_operands = true;
    check(7, 128, 1, o);
    check(100, 384, 45, o);
    check(640, 2560, 70, o, true);
    check(2560, 6912, 33, o);
  }
}

// A table tile with register_operands runs staged where the probe found no PTX fragments.
TEST_F(TernaryMatmulCoopmat, RegisterOperandTilesNeedTheProbe) {
  ops::OpTarget t = target();
  ops::Tuning tuning = ops::tuning_for(t);
  tuning.coop_tile_short.register_operands = false, tuning.coop_tile_tall.register_operands = false,
  tuning.coop_tile_deep.register_operands = false;
  EXPECT_FALSE(ops::asks_register_operands(tuning));  // no start-up probes the device then
  tuning.coop_tile_short.register_operands = true;
  EXPECT_TRUE(ops::asks_register_operands(tuning));
  const ops::ScopedTuning scoped(tuning);
  t.int8_fragments.reset();
  EXPECT_FALSE(ops::coop_tiles_for(t, 2560, 2560).register_operands);
  t.int8_fragments = ops::Int8FragmentOrder::ptx();
  EXPECT_TRUE(ops::coop_tiles_for(t, 2560, 2560).register_operands);
  t.int8_fragments.reset();
  t.matrix_shapes = {MatrixShape{16, 8, 32, ScalarKind::I8, ScalarKind::I32}};
  t.subgroup_size = 32;
  ops::CoopMatmulOptions o = ops::coop_tiles_for(t, 2560, 2560);
  o.register_operands = true;
  EXPECT_THROW(ops::ternary_matmul_coopmat(t, 2560, 2560, o), std::invalid_argument);
}

// Gate and up in one dispatch (CoopMatmulOptions::gate_up): act(gate) * up of what the two
// projections write apart, with ReLU^2 bit for bit (two multiplications, each rounded as the CPU's),
// with SiLU within its exp's error. Tiles: the target's for gate/up, 128 x 128 in two passes, a
// subgroup alone (8 rows of each) and 3 row subgroups (24 of each); rows that fill no tile.
TEST_F(TernaryMatmulCoopmat, FusedGateUpIsTheProductOfTheTwoProjections) {
  if (!has_tensor_cores()) GTEST_SKIP() << why_skipped();
  std::vector<ops::CoopMatmulOptions> tiles = {ops::coop_tiles_for(target(), 6912, 2560)};
  for (auto [rs, ts, rt, tt] : {std::array<uint32_t, 4>{4, 2, 2, 8}, {1, 1, 1, 1}, {3, 1, 1, 2}}) {
    ops::CoopMatmulOptions o;
    o.row_subgroups = rs, o.token_subgroups = ts, o.row_tiles = rt, o.token_tiles = tt;
    tiles.push_back(o);
  }
  // Operands read into the fragments, where the device holds PTX's: gate's tiles then up's per subgroup.
  if (probed().int8_fragments)
    for (auto [rs, ts, rt, tt] : {std::array<uint32_t, 4>{4, 2, 2, 4}, {1, 1, 2, 1}, {3, 1, 4, 3}}) {
      ops::CoopMatmulOptions o;
      o.row_subgroups = rs, o.token_subgroups = ts, o.row_tiles = rt, o.token_tiles = tt, o.register_operands = true;
      tiles.push_back(o);
    }
  for (const auto& tile : tiles)
    for (auto [rows, cols, tokens] : {std::array<uint32_t, 3>{100, 384, 45}, {640, 2560, 70}})
      for (auto act : {ops::GateActivation::Relu2, ops::GateActivation::Silu}) {
        SCOPED_TRACE(testing::Message() << ops::to_string(act) << " " << rows << "x" << cols << " tokens " << tokens << " tile "
                                        << tile.row_subgroups << "x" << tile.token_subgroups << "x" << tile.row_tiles << "x"
                                        << tile.token_tiles << (tile.register_operands ? " register operands" : ""));
        const I2sWeights wg = random_i2s(rows, cols, rows + 1, 1.5f), wu = random_i2s(rows, cols, rows + 2, 0.5f);
        const Tokens x = quantize_tokens(tokens, cols, cols + tokens, 7);
        rt::Buffer g = buffer_of(wg.bytes, "w_gate"), u = buffer_of(wu.bytes, "w_up");
        rt::Buffer qb = buffer_of(x.words, "x_q"), ab = buffer_of(x.act, "x_act");
        rt::Buffer yg = output(uint64_t(rows) * tokens * 4, "gate"), yu = output(uint64_t(rows) * tokens * 4, "up");
        rt::Buffer y = output(uint64_t(rows) * tokens * 4, "y");
        const ops::Plan apart = ops::plan_ternary_matmul_coopmat(probed(), rows, cols, tile);
        ops::CoopMatmulOptions fused_tile = tile;
        fused_tile.gate_up = act;
        const ops::Plan fused = ops::plan_ternary_matmul_coopmat(probed(), rows, cols, fused_tile);
        const uint32_t half_tile = tile.row_subgroups * tile.row_tiles * 8;  // rows of gate (and of up) a workgroup
        ASSERT_EQ(fused.grid(tokens).x, (rows + half_tile - 1) / half_tile);
        run2d(apart.kernel, {g, qb, ab, yg}, apart.grid(tokens).x, apart.grid(tokens).y, rt::push(tokens));
        run2d(apart.kernel, {u, qb, ab, yu}, apart.grid(tokens).x, apart.grid(tokens).y, rt::push(tokens));
        run2d(fused.kernel, {g, u, qb, ab, y}, fused.grid(tokens).x, fused.grid(tokens).y, rt::push(tokens));
        const auto gate = yg.download<float>(), up = yu.download<float>(), got = y.download<float>();
        std::vector<float> want(got.size());
        if (act == ops::GateActivation::Relu2) {
          golden::relu2_gate(gate, up, want);
          for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "token " << i / rows << " row " << i % rows;
        } else {
          golden::silu_gate(gate, up, want);
          for (size_t i = 0; i < got.size(); ++i)  // the division and exp of SiLU within what Vulkan allows
            ASSERT_NEAR(got[i], want[i], (1e-6f + silu_exp_error(gate[i])) * std::fabs(want[i]) + 1e-30f)
                << "token " << i / rows << " row " << i % rows;
        }
      }
}

// What the fused gate/up binds and refuses, on any device (built for an NVIDIA-like target).
TEST_F(TernaryMatmulCoopmat, FusedGateUpBindsBothWeightsAndRefusesASplit) {
  ops::OpTarget t = target();
  t.matrix_shapes = {MatrixShape{16, 8, 32, ScalarKind::I8, ScalarKind::I32}};
  t.subgroup_size = 32;
  t.max_shared_bytes = 49152;
  t.max_workgroup_invocations = 1024;
  ops::CoopMatmulOptions o;
  o.row_subgroups = 4, o.token_subgroups = 2, o.row_tiles = 2, o.token_tiles = 8;
  o.gate_up = ops::GateActivation::Relu2;
  std::vector<std::string> names;
  for (const auto& b : codegen::interface_of(ops::ternary_matmul_coopmat(t, 6912, 2560, o)).bindings) names.push_back(b.name);
  EXPECT_EQ(names, (std::vector<std::string>{"w_gate", "w_up", "x_q", "x_act", "y"}));
  EXPECT_EQ(ops::ternary_matmul_coopmat_row_groups(t, 6912, o), 108u) << "64 rows of gate and of up a workgroup";
  o.k_splits = 2;
  EXPECT_THROW(ops::ternary_matmul_coopmat(t, 6912, 2560, o), std::invalid_argument);
}

TEST_F(TernaryMatmulCoopmat, ResidualAdd) {
  if (!has_tensor_cores()) GTEST_SKIP() << why_skipped();
  check(96, 384, 9, ops::MatmulEngine::CooperativeMatrix, true);
}

TEST_F(TernaryMatmulCoopmat, AutoRunsOnEveryDevice) {
  check(100, 384, 11, ops::MatmulEngine::Auto);
  check(100, 384, 11, ops::MatmulEngine::Subgroup);
}

TEST_F(TernaryMatmulCoopmat, DeviceWithoutTensorCoresRefusesTheKernel) {
  if (has_tensor_cores()) GTEST_SKIP() << "device " << ctx().info().name << " has cooperative matrices";
  ops::OpTarget t = target();
  t.matrix_shapes = {MatrixShape{16, 8, 32, ScalarKind::I8, ScalarKind::I32}};
  t.subgroup_size = 32;
  t.max_shared_bytes = 49152;  // as an NVIDIA GPU: the kernel is built, the runtime must refuse it
  t.max_workgroup_invocations = 1024;
  const dsl::Kernel k = ops::ternary_matmul_coopmat(t, 64, 256);
  try {
    rt::check_device_can_run(ctx().info(), codegen::interface_of(k));
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(ctx().info().name), std::string::npos) << msg;
    EXPECT_NE(msg.find(k.name()), std::string::npos) << msg;
    EXPECT_NE(msg.find("cooperative_matrix_nv"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace bdsl::test
