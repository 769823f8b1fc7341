// The pruned greedy LM head (ops/head/lm_head_pruned.h over models/bitnet/greedy_head.h's int8 shadow):
// the shadow's bound holds, and the two kernels pick exactly the full head's argmax (lm_head, then
// argmax_partial and argmax_final) on random rows, planted ties, a flat table where every row is
// a candidate, a zero x, and a table in several parts; for one row or a batch of them.
#include <cmath>
#include <random>

#include "head_test_fixture.h"
#include "ops/common/rms_norm.h"
#include "ops/head/argmax.h"
#include "ops/head/lm_head_bounds_coopmat.h"
#include "ops/head/lm_head_pruned.h"
#include "ops/head/lm_head_shadow.h"

namespace bdsl::test {
namespace {

TEST(GreedyHeadShadow, BoundsTheQuantizationError) {
  const uint32_t rows = 64, cols = 256;
  auto table = random_table(rows, cols, 1);
  for (uint32_t c = 0; c < cols; ++c) table[c] = 0;  // row 0: zeros
  table[cols + 7] = numerics::f32_to_f16(3.0f);          // row 1: one outlier
  const auto q = bitnet::quantize_rows_int8(table, rows, cols);
  EXPECT_EQ(q.scale[0], 0.0f);
  for (uint32_t trial = 0; trial < 20; ++trial) {
    const auto x = random_floats(cols, 100 + trial, trial % 2 ? 0.01f : 10.0f);
    double norm = 0;
    for (float v : x) norm += double(v) * v;
    norm = std::sqrt(norm);
    for (uint32_t r = 0; r < rows; ++r) {
      double exact = 0, shadow = 0;
      for (uint32_t c = 0; c < cols; ++c) {
        const int8_t code = int8_t(q.words[(size_t(r) * cols + c) / 4] >> (8 * (c % 4)));
        exact += double(numerics::f16_to_f32(table[size_t(r) * cols + c])) * x[c];
        shadow += double(q.scale[r]) * code * x[c];
      }
      ASSERT_LE(std::abs(exact - shadow), double(q.bound[2 * r]) * norm) << "row " << r << " trial " << trial;
      // d_r bounds the shadow row's norm: |s q . (x - x~)| <= d_r ||x - x~|| for any x~.
      double qn = 0;
      for (uint32_t c = 0; c < cols; ++c) {
        const double v = double(q.scale[r]) * int8_t(q.words[(size_t(r) * cols + c) / 4] >> (8 * (c % 4)));
        qn += v * v;
      }
      ASSERT_LE(std::sqrt(qn), double(q.bound[2 * r + 1])) << "row " << r;
    }
  }
  EXPECT_THROW(bitnet::quantize_rows_int8(table, rows, cols + 4), std::invalid_argument);
}

// The shadow as the model derives it on the device (ops/head/lm_head_shadow.h) from the F16 table
// in parts: the host twin's scales and codes (but where f32 and double round a value near a half
// step apart), bounds that hold for the codes it wrote, and not much looser than the twin's.
TEST_F(HeadTest, TheDeviceShadowIsTheHostTwinsWithBoundsThatHold) {
  const uint32_t vocab = 300, dim = 256, rows_per_part = 128;  // three parts, the last short
  auto table = random_table(vocab, dim, 5);
  for (uint32_t c = 0; c < dim; ++c) table[c] = 0;           // row 0: zeros
  table[dim + 7] = numerics::f32_to_f16(3.0f);                // row 1: one outlier
  for (uint32_t c = 0; c < dim; ++c) table[2 * dim + c] = numerics::f32_to_f16(c % 2 ? 1e-4f : -2e-4f);  // row 2: tiny
  const ops::OpTarget t = ops::OpTarget::from(ctx().info());
  const ops::LmHeadSplit split = ops::lm_head_split(t, vocab, dim, rows_per_part);
  ASSERT_EQ(split.parts, 3u);
  const auto twin = bitnet::quantize_rows_int8(table, vocab, dim);
  auto [f16_parts, twin_parts] = table_parts(table, twin, split, vocab, dim);
  bitnet::SplitMatrix m{std::move(f16_parts), vocab, dim, rows_per_part};
  const ops::PlannedPipeline shadow = ops::make_pipeline(ctx(), ops::plan_lm_head_shadow(t, vocab, dim, rows_per_part));
  const bitnet::GreedyHead h = bitnet::derive_greedy_head(ctx(), shadow, m);
  ASSERT_EQ(h.parts.size(), 3u);
  std::vector<uint32_t> words;
  for (const auto& part : h.parts) {
    const auto w = part.download<uint32_t>();
    words.insert(words.end(), w.begin(), w.end());
  }
  const auto scale = h.scale.download<float>();
  const auto bound = h.bound.download<float>();
  ASSERT_EQ(words.size(), twin.words.size());
  EXPECT_EQ(scale[0], 0.0f);
  // Row 2's values sit on half steps (f32 and double disagree there); elsewhere a division that
  // rounds a value near a half step apart is rare.
  size_t same = 0, compared = 0;
  for (size_t i = 0; i < words.size(); ++i)
    for (uint32_t j = 0; j < 4 && i * 4 / dim != 2; ++j, ++compared) same += uint8_t(words[i] >> (8 * j)) == uint8_t(twin.words[i] >> (8 * j));
  EXPECT_GE(double(same), 0.999 * double(compared)) << "codes that differ from the host twin's";
  const double gamma = 2.0 * dim * std::ldexp(1.0, -24);
  for (uint32_t r = 0; r < vocab; ++r) {
    EXPECT_LE(std::abs(scale[r] - twin.scale[r]), 2 * std::abs(std::nextafter(twin.scale[r], INFINITY) - twin.scale[r])) << "row " << r;
    double err2 = 0, q2 = 0, w2 = 0;
    for (uint32_t c = 0; c < dim; ++c) {
      const double w = numerics::f16_to_f32(table[size_t(r) * dim + c]);
      const int q = int8_t(words[(size_t(r) * dim + c) / 4] >> (8 * (c % 4)));
      const double e = w - double(scale[r]) * q;
      err2 += e * e, q2 += double(q) * q, w2 += w * w;
    }
    const double c_exact = std::sqrt(err2) + gamma * (double(scale[r]) * std::sqrt(q2) + std::sqrt(w2));
    ASSERT_GE(double(bound[2 * r]), c_exact) << "row " << r;
    ASSERT_GE(double(bound[2 * r + 1]), double(scale[r]) * std::sqrt(q2)) << "row " << r;
    EXPECT_LE(bound[2 * r], twin.bound[2 * r] * 1.01f + 1e-30f) << "row " << r << ": much looser than the twin's";
  }
}

class GreedyHead : public HeadTest {
 protected:
  // The argmax of the full head and of the pruned one, over the same table and x normalized by
  // lm_head_input with a unit weight (the pruned head's first pass; its xn feeds both heads).
  std::pair<uint32_t, uint32_t> argmaxes(const std::vector<uint16_t>& table, const std::vector<float>& x, uint32_t vocab,
                                         uint32_t dim, uint32_t rows_per_part, bool packed_dot = true) {
    ops::OpTarget t = ops::OpTarget::from(ctx().info());
    t.int_dot_product = t.int_dot_product && packed_dot;  // false: the plain int8 dot of lm_head_bounds
    const ops::LmHeadSplit split = ops::lm_head_split(t, vocab, dim, rows_per_part);
    const ops::ArgmaxPlan plan = ops::argmax_plan(t, vocab);
    const auto q = bitnet::quantize_rows_int8(table, vocab, dim);
    rt::Buffer raw = buffer_of(x, "x"), unit = buffer_of(std::vector<float>(dim, 1.0f), "weight");
    auto [f16_parts, int8_parts] = table_parts(table, q, split, vocab, dim);
    rt::Buffer scale = buffer_of(q.scale, "scale"), bound = buffer_of(q.bound, "bound");
    auto out = [&](uint64_t words, const char* name) { return rt::Buffer(ctx(), std::max<uint64_t>(words * 4, 4), {true, name}); };
    rt::Buffer xb = out(dim, "xn"), xq = out(dim / 4, "xq"), stats = out(4, "stats");
    rt::Buffer logits = out(vocab, "logits"), upper = out(vocab, "upper");
    rt::Buffer lower = out(ops::lm_head_bounds_workgroups(t, vocab), "lower");
    rt::Buffer pv = out(plan.groups, "pv"), pi = out(plan.groups, "pi"), full = out(1, "full"), pruned = out(1, "pruned");
    rt::Buffer folded = out(1, "folded"), counter = buffer_of(std::vector<uint32_t>{0}, "counter"), x_next = out(dim, "x_next");
    rt::Pipeline input = pipeline(ops::lm_head_input(t, dim)), head = pipeline(ops::lm_head(t, vocab, dim, rows_per_part));
    rt::Pipeline partial = pipeline(ops::argmax_partial(t, vocab)), final = pipeline(ops::argmax_final(t, vocab));
    rt::Pipeline bounds = pipeline(ops::lm_head_bounds(t, vocab, dim, rows_per_part));
    rt::Pipeline candidates = pipeline(ops::lm_head_candidates(t, vocab, dim, rows_per_part));
    // The same with argmax_final run by its last workgroup, which also writes the chosen row
    // widened to f32 (the greedy graph's: the next token's embedding).
    rt::Pipeline candidates_final = pipeline(ops::lm_head_candidates(t, vocab, dim, rows_per_part, 0u,
                                                                     ops::EmbeddingShape{dim, split.rows_per_part, split.parts}));
    rt::Graph g(ctx());
    g.dispatch(input, {raw, unit, xb, xq, stats}, rt::push(1e-5f), rt::Grid{1});
    std::vector<rt::BufferSlice> b{xb};
    for (auto& p : f16_parts) b.push_back(p);
    b.push_back(logits);
    g.dispatch(head, b, rt::push(), rt::Grid{ops::lm_head_workgroups(t, vocab)});
    g.dispatch(partial, {logits, pv, pi}, rt::Grid{plan.groups});
    g.dispatch(final, {pv, pi, full}, rt::Grid{1});
    b = {xq, stats};
    for (auto& p : int8_parts) b.push_back(p);
    b.insert(b.end(), {scale, bound, upper, lower});
    g.dispatch(bounds, b, rt::push(), rt::Grid{ops::lm_head_bounds_workgroups(t, vocab)});
    b = {xb};
    for (auto& p : f16_parts) b.push_back(p);
    b.insert(b.end(), {upper, lower, pv, pi});
    g.dispatch(candidates, b, rt::push(), rt::Grid{plan.groups});
    g.dispatch(final, {pv, pi, pruned}, rt::Grid{1});
    b.insert(b.end(), {counter, folded});
    for (auto& p : f16_parts) b.push_back(p);
    b.push_back(x_next);
    g.dispatch(candidates_final, b, rt::push(), rt::Grid{plan.groups});
    for (int replay = 0; replay < 2; ++replay) {  // the counter is left zero for the next replay
      folded.upload(std::vector<uint32_t>{0xdeadbeefu});
      g.submit_and_wait();
      EXPECT_EQ(folded.download<uint32_t>()[0], pruned.download<uint32_t>()[0]) << "replay " << replay;
      EXPECT_EQ(counter.download<uint32_t>()[0], 0u);
      const uint32_t chosen = folded.download<uint32_t>()[0];
      std::vector<float> row(dim);
      for (uint32_t j = 0; j < dim; ++j) row[j] = numerics::f16_to_f32(table[size_t(chosen) * dim + j]);
      EXPECT_EQ(x_next.download<float>(), row) << "the chosen row, widened";
    }
    // Every upper bound is at or above the full head's logit.
    const auto l = logits.download<float>(), u = upper.download<float>();
    for (uint32_t r = 0; r < vocab; ++r) EXPECT_GE(u[r], l[r]) << "row " << r;
    return {full.download<uint32_t>()[0], pruned.download<uint32_t>()[0]};
  }
};

TEST_F(GreedyHead, PicksTheFullHeadsArgmax) {
  const uint32_t vocab = 9000, dim = 256;
  for (uint32_t seed : {1u, 2u, 3u}) {
    const auto table = random_table(vocab, dim, seed);
    for (bool packed : {true, false}) {
      const auto [full, pruned] = argmaxes(table, random_floats(dim, seed + 50, 1.5f), vocab, dim, vocab, packed);
      EXPECT_EQ(pruned, full) << "seed " << seed << " packed dot " << packed;
    }
  }
}

TEST_F(GreedyHead, KeepsTheLowestIndexOfTies) {
  const uint32_t vocab = 9000, dim = 256;
  auto table = random_table(vocab, dim, 4);
  const auto x = random_floats(dim, 5, 1.5f);
  const uint32_t winner = argmaxes(table, x, vocab, dim, vocab).first;
  // Copies of the winner's row later and earlier (in another workgroup of either kernel).
  for (uint32_t copy : {winner + 1 < vocab ? winner + 1 : 0u, 8999u, 17u}) {
    if (copy == winner) continue;
    std::copy_n(table.begin() + size_t(winner) * dim, dim, table.begin() + size_t(copy) * dim);
    const auto [full, pruned] = argmaxes(table, x, vocab, dim, vocab);
    EXPECT_EQ(full, std::min(winner, copy));
    EXPECT_EQ(pruned, full);
  }
}

TEST_F(GreedyHead, EveryRowACandidateStillPicksTheFirst) {
  const uint32_t vocab = 5000, dim = 128;
  std::vector<uint16_t> table(size_t(vocab) * dim, numerics::f32_to_f16(0.25f));  // all rows equal
  auto [full, pruned] = argmaxes(table, random_floats(dim, 6, 1.5f), vocab, dim, vocab);
  EXPECT_EQ(full, 0u);
  EXPECT_EQ(pruned, 0u);
  std::tie(full, pruned) = argmaxes(random_table(vocab, dim, 7), std::vector<float>(dim, 0.0f), vocab, dim, vocab);
  EXPECT_EQ(pruned, full);  // x = 0: every logit 0
}

TEST_F(GreedyHead, WorksOverSeveralParts) {
  const uint32_t vocab = 6000, dim = 128;
  for (uint32_t seed : {8u, 9u}) {
    const auto [full, pruned] = argmaxes(random_table(vocab, dim, seed), random_floats(dim, seed, 1.5f), vocab, dim, 1024);
    EXPECT_EQ(pruned, full);
  }
}

// lm_head_input: the final norm bit for bit as rms_norm, x quantized as the bounds pass would and
// the norms its margins need; then the bounds from that input and the candidates with their final
// pass pick the full head's argmax.
TEST_F(GreedyHead, TheInputPassNormalizesAsRmsNormAndItsBoundsHold) {
  const uint32_t vocab = 9000;
  for (uint32_t dim : {256u, 2560u})
    for (uint32_t seed : {21u, 22u}) {
      SCOPED_TRACE(testing::Message() << "dim " << dim << " seed " << seed);
      const ops::OpTarget t = ops::OpTarget::from(ctx().info());
      const ops::ArgmaxPlan plan = ops::argmax_plan(t, vocab);
      const auto table = random_table(vocab, dim, seed);
      const auto q = bitnet::quantize_rows_int8(table, vocab, dim);
      const float eps = 1e-5f;
      auto out = [&](uint64_t words, const char* name) { return rt::Buffer(ctx(), std::max<uint64_t>(words * 4, 4), {true, name}); };
      rt::Buffer raw = buffer_of(random_floats(dim, seed, 3.0f), "x"), weight = buffer_of(random_floats(dim, seed + 7, 0.5f), "weight");
      rt::Buffer xn_ref = out(dim, "xn_ref"), xn = out(dim, "xn"), xq = out(dim / 4, "xq"), stats = out(4, "stats");
      rt::Buffer f16 = buffer_of(table, "f16"), int8 = buffer_of(q.words, "int8");
      rt::Buffer scale = buffer_of(q.scale, "scale"), bound = buffer_of(q.bound, "bound");
      rt::Buffer logits = out(vocab, "logits"), upper = out(vocab, "upper");
      rt::Buffer lower = out(ops::lm_head_bounds_workgroups(t, vocab), "lower");
      rt::Buffer pv = out(plan.groups, "pv"), pi = out(plan.groups, "pi"), full = out(1, "full"), pruned = out(1, "pruned");
      rt::Buffer counter = buffer_of(std::vector<uint32_t>{0}, "counter");
      // Pipelines must outlive the graph's submits.
      rt::Pipeline norm = pipeline(ops::rms_norm(t, dim)), input = pipeline(ops::lm_head_input(t, dim));
      rt::Pipeline head = pipeline(ops::lm_head(t, vocab, dim, vocab)), partial = pipeline(ops::argmax_partial(t, vocab));
      rt::Pipeline final = pipeline(ops::argmax_final(t, vocab));
      rt::Pipeline bounds = pipeline(ops::lm_head_bounds(t, vocab, dim, vocab));
      rt::Pipeline candidates = pipeline(ops::lm_head_candidates(t, vocab, dim, vocab, 0u));
      rt::Graph g(ctx());
      g.dispatch(norm, {raw, weight, xn_ref}, rt::push(eps), rt::Grid{1});
      g.dispatch(input, {raw, weight, xn, xq, stats}, rt::push(eps), rt::Grid{1});
      g.dispatch(head, {xn_ref, f16, logits}, rt::push(), rt::Grid{ops::lm_head_workgroups(t, vocab)});
      g.dispatch(partial, {logits, pv, pi}, rt::Grid{plan.groups});
      g.dispatch(final, {pv, pi, full}, rt::Grid{1});
      g.dispatch(bounds, {xq, stats, int8, scale, bound, upper, lower}, rt::push(), rt::Grid{ops::lm_head_bounds_workgroups(t, vocab)});
      g.dispatch(candidates, {xn, f16, upper, lower, pv, pi, counter, pruned}, rt::push(), rt::Grid{plan.groups});
      g.submit_and_wait();
      const auto v = xn.download<float>(), s = stats.download<float>();
      EXPECT_EQ(v, xn_ref.download<float>()) << "the candidates' x must be the full head's";
      float top = 0;
      for (float e : v) top = std::max(top, std::fabs(e));
      EXPECT_NEAR(s[0], top / 127.0f, 1e-6f * top);
      const auto words = xq.download<uint32_t>();
      double sq = 0, res = 0;
      for (uint32_t i = 0; i < dim; ++i) {
        const int r = int(int8_t(uint8_t(words[i / 4] >> (8 * (i % 4)))));
        ASSERT_LE(std::fabs(double(v[i]) / s[0] - r), 0.5 + 1e-3) << "element " << i;
        sq += double(v[i]) * v[i];
        res += (double(v[i]) - double(s[0]) * r) * (double(v[i]) - double(s[0]) * r);
      }
      EXPECT_GE(s[1], std::sqrt(sq));
      EXPECT_LE(s[1], 1.0011 * std::sqrt(sq));
      EXPECT_GE(s[2], std::sqrt(res));
      EXPECT_LE(s[2], 1.0011 * std::sqrt(res) + 1e-6);
      const auto l = logits.download<float>(), u = upper.download<float>();
      for (uint32_t r = 0; r < vocab; ++r) ASSERT_GE(u[r], l[r]) << "row " << r;
      EXPECT_EQ(pruned.download<uint32_t>()[0], full.download<uint32_t>()[0]);
    }
}

// The pruned head for a batch (lm_head_input and lm_head_bounds with rows, lm_head_candidate_rows,
// argmax_final with rows; on int8 tensor cores lm_head_bounds_coopmat where the device has them):
// every row's xn, int8 x, stats and upper bounds are the single row's kernels' bits, its largest
// lower bound theirs, and its token the full head's argmax for that row alone, whether
// argmax_final runs on its own or in each row's last candidates workgroup (final_pick; replayed
// twice: the counters are left zero for the next replay). One row is zero
// (every logit 0: the first row wins) and one copies another (the same token); 70 rows take the
// tensor-core bounds two grid rows of 64 x, the second partly empty.
TEST_F(HeadTest, TheBatchedPrunedHeadGivesEveryRowItsOwnArgmax) {
  const uint32_t vocab = 9000, dim = 256, rows = 70;
  const ops::OpTarget t = ops::OpTarget::from(ctx().info());
  const ops::ArgmaxPlan plan = ops::argmax_plan(t, vocab);
  const auto table = random_table(vocab, dim, 31);
  const auto q = bitnet::quantize_rows_int8(table, vocab, dim);
  std::vector<float> x = random_floats(rows * dim, 32, 3.0f);
  std::fill_n(x.begin() + 3 * dim, dim, 0.0f);
  std::copy_n(x.begin(), dim, x.begin() + 5 * dim);
  const auto weight_values = random_floats(dim, 33, 0.5f);
  const float eps = 1e-5f;
  auto out = [&](uint64_t words, const char* name) { return rt::Buffer(ctx(), std::max<uint64_t>(words * 4, 4), {true, name}); };
  for (uint32_t rows_per_part : {vocab, 4096u}) {
    SCOPED_TRACE(testing::Message() << "rows per part " << rows_per_part);
    const ops::LmHeadSplit split = ops::lm_head_split(t, vocab, dim, rows_per_part);
    auto [f16_parts, int8_parts] = table_parts(table, q, split, vocab, dim);
    rt::Buffer weight = buffer_of(weight_values, "weight"), scale = buffer_of(q.scale, "scale"), bound = buffer_of(q.bound, "bound");
    const uint32_t groups = ops::lm_head_bounds_workgroups(t, vocab), stride = vocab + 7;
    rt::Pipeline input = pipeline(ops::lm_head_input(t, dim)), bounds = pipeline(ops::lm_head_bounds(t, vocab, dim, rows_per_part));
    rt::Pipeline candidates = pipeline(ops::lm_head_candidates(t, vocab, dim, rows_per_part));
    rt::Pipeline final = pipeline(ops::argmax_final(t, vocab)), head = pipeline(ops::lm_head(t, vocab, dim, rows_per_part));
    rt::Pipeline partial = pipeline(ops::argmax_partial(t, vocab));
    auto with = [](std::vector<rt::BufferSlice> b, const std::vector<rt::Buffer>& parts, std::vector<rt::BufferSlice> after) {
      for (auto& p : parts) b.push_back(p);
      b.insert(b.end(), after.begin(), after.end());
      return b;
    };
    // Each row alone: the single-row kernels, and the full head's argmax.
    std::vector<std::vector<float>> xn1, stats1, upper1;
    std::vector<std::vector<uint32_t>> xq1;
    std::vector<float> lower1;
    std::vector<uint32_t> full1;
    for (uint32_t r = 0; r < rows; ++r) {
      rt::Buffer raw = buffer_of(std::vector<float>(x.begin() + r * dim, x.begin() + (r + 1) * dim), "x");
      rt::Buffer xn = out(dim, "xn"), xq = out(dim / 4, "xq"), stats = out(4, "stats"), upper = out(vocab, "upper");
      rt::Buffer lower = out(groups, "lower"), logits = out(vocab, "logits"), pv = out(plan.groups, "pv"), pi = out(plan.groups, "pi");
      rt::Buffer full = out(1, "full");
      rt::Graph g(ctx());
      g.dispatch(input, {raw, weight, xn, xq, stats}, rt::push(eps), rt::Grid{1});
      g.dispatch(bounds, with({xq, stats}, int8_parts, {scale, bound, upper, lower}), rt::push(), rt::Grid{groups});
      g.dispatch(head, with({xn}, f16_parts, {logits}), rt::push(), rt::Grid{ops::lm_head_workgroups(t, vocab)});
      g.dispatch(partial, {logits, pv, pi}, rt::Grid{plan.groups});
      g.dispatch(final, {pv, pi, full}, rt::Grid{1});
      g.submit_and_wait();
      xn1.push_back(xn.download<float>());
      xq1.push_back(xq.download<uint32_t>());
      stats1.push_back(stats.download<float>());
      upper1.push_back(upper.download<float>());
      const auto l = lower.download<float>();
      lower1.push_back(*std::max_element(l.begin(), l.end()));
      full1.push_back(full.download<uint32_t>()[0]);
    }
    EXPECT_EQ(full1[3], 0u) << "a zero x: every logit 0";
    EXPECT_EQ(full1[5], full1[0]);
    // All rows at once, the bounds from either pass.
    const bool tensor_cores = ops::lm_head_bounds_coopmat_fits(t, vocab, dim, split.parts);
    for (bool coopmat : {false, tensor_cores}) {
      SCOPED_TRACE(testing::Message() << "bounds on tensor cores " << coopmat);
      const uint32_t lower_count = coopmat ? ops::lm_head_bounds_coopmat_workgroups(t, vocab) : groups;
      rt::Buffer raw = buffer_of(x, "x"), xn = out(rows * dim, "xn"), xq = out(rows * dim / 4, "xq"), stats = out(rows * 4, "stats");
      rt::Buffer upper = out(rows * stride, "upper"), lower = out(rows * lower_count, "lower");
      rt::Buffer pv = out(rows * plan.groups, "pv"), pi = out(rows * plan.groups, "pi"), token = out(rows, "token");
      const ops::PlannedPipeline input_rows = ops::make_pipeline(ctx(), ops::plan_lm_head_input(t, dim, true));
      const ops::PlannedPipeline candidate_rows =
          ops::make_pipeline(ctx(), ops::plan_lm_head_candidate_rows(t, vocab, dim, rows_per_part, lower_count));
      const ops::PlannedPipeline final_rows = ops::make_pipeline(ctx(), ops::plan_argmax_final(t, vocab, 0, true));
      const ops::PlannedPipeline picking_rows =
          ops::make_pipeline(ctx(), ops::plan_lm_head_candidate_rows(t, vocab, dim, rows_per_part, lower_count, true));
      rt::Buffer picked = out(rows, "picked"), counter = out(rows, "counter");
      counter.fill(0);
      const ops::PlannedPipeline bounds_rows = ops::make_pipeline(
          ctx(), coopmat ? ops::plan_lm_head_bounds_coopmat(t, vocab, dim, rows) : ops::plan_lm_head_bounds(t, vocab, dim, rows_per_part, true));
      rt::Graph g(ctx());
      input_rows.dispatch(g, {{"x", raw}, {"weight", weight}, {"xn", xn}, {"xq", xq}, {"stats", stats}}, rt::push(eps), rows);
      std::vector<rt::Arg> b = {{"xq", xq}, {"stats", stats}, {"scale", scale}, {"bound", bound}, {"upper", upper}, {"lower", lower}};
      for (size_t i = 0; i < int8_parts.size(); ++i) b.push_back({"table" + std::to_string(i), int8_parts[i]});
      bounds_rows.dispatch(g, b, coopmat ? rt::push(rows, stride) : rt::push(stride), rows);
      b = {{"x", xn}, {"upper", upper}, {"lower", lower}, {"part_values", pv}, {"part_indices", pi}};
      for (size_t i = 0; i < f16_parts.size(); ++i) b.push_back({"table" + std::to_string(i), f16_parts[i]});
      candidate_rows.dispatch(g, b, rt::push(stride), rows);
      final_rows.dispatch(g, {{"part_values", pv}, {"part_indices", pi}, {"token", token}}, {}, rows);
      b.insert(b.end(), {{"counter", counter}, {"token", picked}});
      picking_rows.dispatch(g, b, rt::push(stride), rows);
      g.submit_and_wait();
      picked.fill(0xffffffffu);
      g.submit_and_wait();
      const auto xn_all = xn.download<float>(), stats_all = stats.download<float>(), upper_all = upper.download<float>();
      const auto lower_all = lower.download<float>();
      const auto xq_all = xq.download<uint32_t>(), tokens = token.download<uint32_t>();
      const auto picked_all = picked.download<uint32_t>(), counters = counter.download<uint32_t>();
      for (uint32_t r = 0; r < rows; ++r) {
        SCOPED_TRACE(testing::Message() << "row " << r);
        EXPECT_TRUE(std::equal(xn1[r].begin(), xn1[r].end(), xn_all.begin() + r * dim));
        EXPECT_TRUE(std::equal(xq1[r].begin(), xq1[r].end(), xq_all.begin() + r * dim / 4));
        EXPECT_TRUE(std::equal(stats1[r].begin(), stats1[r].end(), stats_all.begin() + r * 4));
        EXPECT_TRUE(std::equal(upper1[r].begin(), upper1[r].end(), upper_all.begin() + size_t(r) * stride)) << "upper bounds";
        EXPECT_EQ(*std::max_element(lower_all.begin() + r * lower_count, lower_all.begin() + (r + 1) * lower_count), lower1[r]);
        EXPECT_EQ(tokens[r], full1[r]);
        EXPECT_EQ(picked_all[r], full1[r]) << "picked by the candidates' last workgroup";
        EXPECT_EQ(counters[r], 0u);
      }
    }
  }
}

}  // namespace
}  // namespace bdsl::test
