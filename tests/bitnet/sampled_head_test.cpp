// Sampling's pruned LM head (the candidate list, then sample_candidate_list, over the int8
// shadow's bounds) draws exactly what the full head, top_k and sample_candidates draw, for one
// row or a batch of them each with its own settings.
#include <bit>
#include <random>

#include "head_test_fixture.h"
#include "ops/head/lm_head_bounds_coopmat.h"
#include "ops/head/lm_head_pruned.h"
#include "ops/head/sample_candidates.h"
#include "ops/head/top_k.h"

namespace bdsl::test {
namespace {

// The same table and x through both of sampling's heads, for each params row: the full one
// (lm_head, top_k_partial, top_k_merge, sample_candidates) and the pruned one (lm_head_input,
// lm_head_bounds, a fill, lm_head_candidate_list, sample_candidate_list with the step's advance and
// the next embedding). The draws and the k' best (value, index) pairs must be the same bits.
class SampledHead : public HeadTest {
 protected:
  static constexpr uint32_t kK = ops::kMaxTopK;

  // Returns the candidate-list lengths, one per params row.
  std::vector<uint32_t> compare(const std::vector<uint16_t>& table, const std::vector<float>& x, uint32_t vocab, uint32_t dim,
                                uint32_t rows_per_part, const std::vector<ops::SampleParams>& settings) {
    const ops::OpTarget t = ops::OpTarget::from(ctx().info());
    const ops::LmHeadSplit split = ops::lm_head_split(t, vocab, dim, rows_per_part);
    const auto q = bitnet::quantize_rows_int8(table, vocab, dim);
    auto [f16_parts, int8_parts] = table_parts(table, q, split, vocab, dim);
    auto out = [&](uint64_t words, const char* name) { return rt::Buffer(ctx(), std::max<uint64_t>(words * 4, 4), {true, name}); };
    rt::Buffer raw = buffer_of(x, "x"), unit = buffer_of(std::vector<float>(dim, 1.0f), "weight");
    rt::Buffer scale = buffer_of(q.scale, "scale"), bound = buffer_of(q.bound, "bound");
    rt::Buffer xn = out(dim, "xn"), xq = out(dim / 4, "xq"), stats = out(4, "stats"), logits = out(vocab, "logits");
    rt::Buffer upper = out(vocab, "upper"), lower = out(ops::lm_head_bounds_workgroups(t, vocab), "lower");
    const ops::TopKPlan top = ops::top_k_plan(t, vocab, kK);
    rt::Buffer tpv = out(top.groups * kK, "tpv"), tpi = out(top.groups * kK, "tpi"), full_v = out(kK, "full_v"), full_i = out(kK, "full_i");
    rt::Buffer params = out(ops::kSampleParamsWords, "params"), full_token = out(1, "full_token");
    rt::Buffer list_v = out(vocab, "list_v"), list_i = out(vocab, "list_i"), list_n = buffer_of(std::vector<uint32_t>{0}, "list_n");
    rt::Buffer pruned_v = out(kK, "pruned_v"), pruned_i = out(kK, "pruned_i"), pruned_token = out(1, "pruned_token");
    rt::Buffer list_length = out(1, "list_length");
    rt::Buffer step = out(4, "step"), generated = out(64, "generated"), x_next = out(dim, "x_next");
    rt::Pipeline input = pipeline(ops::lm_head_input(t, dim)), head = pipeline(ops::lm_head(t, vocab, dim, rows_per_part));
    rt::Pipeline partial = pipeline(ops::top_k_partial(t, vocab, kK)), merge = pipeline(ops::top_k_merge(t, vocab, kK));
    rt::Pipeline sample = pipeline(ops::sample_candidates(t, kK));
    rt::Pipeline bounds = pipeline(ops::lm_head_bounds(t, vocab, dim, rows_per_part));
    rt::Pipeline list = pipeline(ops::lm_head_candidate_list(t, vocab, dim, rows_per_part, kK));
    rt::Pipeline draw = pipeline(ops::sample_candidate_list(t, kK, 64, ops::EmbeddingShape{dim, split.rows_per_part, split.parts}));
    rt::Graph g(ctx());
    g.dispatch(input, {raw, unit, xn, xq, stats}, rt::push(1e-5f), rt::Grid{1});
    std::vector<rt::BufferSlice> b{xn};
    for (auto& p : f16_parts) b.push_back(p);
    b.push_back(logits);
    g.dispatch(head, b, rt::push(), rt::Grid{ops::lm_head_workgroups(t, vocab)});
    g.dispatch(partial, {logits, tpv, tpi}, rt::Grid{top.groups});
    g.dispatch(merge, {tpv, tpi, full_v, full_i}, rt::Grid{1});
    g.dispatch(sample, {full_v, full_i, params, full_token}, rt::Grid{1});
    b = {xq, stats};
    for (auto& p : int8_parts) b.push_back(p);
    b.insert(b.end(), {scale, bound, upper, lower});
    g.dispatch(bounds, b, rt::push(), rt::Grid{ops::lm_head_bounds_workgroups(t, vocab)});
    b = {xn};
    for (auto& p : f16_parts) b.push_back(p);
    b.insert(b.end(), {upper, lower, params, list_v, list_i, list_n});
    g.dispatch(list, b, rt::push(), rt::Grid{ops::lm_head_candidate_list_workgroups(t, vocab)});
    b = {list_v, list_i, list_n, params, pruned_v, pruned_i, pruned_token, list_length, step, generated};
    for (auto& p : f16_parts) b.push_back(p);  // the embedding table: the head's table here
    b.push_back(x_next);
    g.dispatch(draw, b, rt::push(), rt::Grid{1});
    std::vector<uint32_t> lengths;
    for (size_t r = 0; r < settings.size(); ++r) {
      SCOPED_TRACE(testing::Message() << "params row " << r);
      const uint32_t pos = uint32_t(r % 60);
      ops::SampleParams s = settings[r];
      s.counter = pos + 1;  // the advancing draw's counter: the chosen token's position
      const auto words = s.pack();
      params.upload(std::vector<uint32_t>(words.begin(), words.end()));
      step.upload(std::vector<uint32_t>{7, pos, 0, 5});
      g.submit_and_wait();
      const uint32_t k_wanted = s.inverse_temperature == 0 ? 1 : s.top_k > 0 ? std::min(s.top_k, kK) : kK;
      const auto fv = full_v.download<float>(), pv = pruned_v.download<float>();
      const auto fi = full_i.download<uint32_t>(), pi = pruned_i.download<uint32_t>();
      for (uint32_t i = 0; i < k_wanted; ++i) {
        EXPECT_EQ(std::bit_cast<uint32_t>(pv[i]), std::bit_cast<uint32_t>(fv[i])) << "candidate " << i;
        EXPECT_EQ(pi[i], fi[i]) << "candidate " << i;
      }
      const uint32_t chosen = pruned_token.download<uint32_t>()[0];
      EXPECT_EQ(chosen, full_token.download<uint32_t>()[0]);
      EXPECT_EQ(step.download<uint32_t>(), (std::vector<uint32_t>{chosen, pos + 1, 0, 6})) << "the step state moves on";
      EXPECT_EQ(generated.download<uint32_t>()[pos], chosen);
      std::vector<float> row(dim);
      for (uint32_t j = 0; j < dim; ++j) row[j] = numerics::f16_to_f32(table[size_t(chosen) * dim + j]);
      EXPECT_EQ(x_next.download<float>(), row) << "the chosen row, widened";
      EXPECT_EQ(list_n.download<uint32_t>()[0], 0u) << "the draw leaves the list empty for the next replay";
      lengths.push_back(list_length.download<uint32_t>()[0]);
      EXPECT_GE(lengths.back(), k_wanted);
    }
    return lengths;
  }

  static std::vector<ops::SampleParams> settings() {
    std::vector<ops::SampleParams> s;
    const float inverse_temperatures[] = {0.0f, 1.25f, 1.0f, 0.5f};
    const uint32_t top_ks[] = {0, 1, 40, 128, 500};
    uint32_t n = 0;
    for (float it : inverse_temperatures)
      for (uint32_t top_k : top_ks) {
        s.push_back({it, top_k, n % 3 == 0 ? 1.0f : 0.95f, n % 4 == 1 ? 0.05f : 0.0f, 1000ull + 77 * n, 0});
        ++n;
      }
    return s;
  }
};

TEST_F(SampledHead, DrawsWhatTheFullHeadDraws) {
  const uint32_t vocab = 9000, dim = 256;
  for (uint32_t seed : {31u, 32u}) {
    const auto lengths = compare(random_table(vocab, dim, seed), random_floats(dim, seed + 50, 1.5f), vocab, dim, vocab, settings());
    // The bounds prune: a greedy draw's list is far shorter than the vocabulary.
    EXPECT_LT(lengths[0], vocab / 4) << "seed " << seed;
  }
}

TEST_F(SampledHead, DrawsWhatTheFullHeadDrawsOverSeveralPartsAndTies) {
  const uint32_t vocab = 6000, dim = 128;
  auto table = random_table(vocab, dim, 33);
  // Copies of one row: ties that the list must order by index as top_k does.
  for (uint32_t copy : {5u, 2999u, 3000u, 5998u}) std::copy_n(table.begin() + 17 * dim, dim, table.begin() + size_t(copy) * dim);
  compare(table, random_floats(dim, 34, 1.5f), vocab, dim, 1024, settings());
}

TEST_F(SampledHead, EveryRowOnTheListStillDrawsTheSame) {
  // Equal rows: every row is a candidate, so the list takes the windowed rounds.
  const uint32_t vocab = 5000, dim = 128;
  std::vector<uint16_t> table(size_t(vocab) * dim, numerics::f32_to_f16(0.25f));
  const auto lengths = compare(table, random_floats(dim, 35, 1.5f), vocab, dim, vocab, settings());
  EXPECT_EQ(lengths[1], vocab);
}

// Sampling's pruned head for a batch (lm_head_candidate_list_rows, sample_candidate_list_rows
// after lm_head_input and the bounds with rows): every row, under its own settings, draws the
// token the single-row kernels draw for it alone, with the same k' best (value, index) bits, and
// its `best` is their first id. With lm_head_bounds' rows the lower bounds are the single row's,
// so the list is as long too; on tensor cores (the coopmat bounds, where the device has them) the
// lists differ, the draws do not. Replayed twice: each list's count is left zero. One row is zero
// (every logit 0: ties everywhere), one copies another's x and settings (the same draw).
TEST_F(SampledHead, TheBatchedListGivesEveryRowItsOwnDraw) {
  const uint32_t vocab = 7000, dim = 256;
  const ops::OpTarget t = ops::OpTarget::from(ctx().info());
  const std::vector<ops::SampleParams> settings_all = settings();
  const uint32_t rows = uint32_t(settings_all.size()) + 2;
  auto table = random_table(vocab, dim, 41);
  for (uint32_t copy : {11u, 4000u}) std::copy_n(table.begin() + 9 * dim, dim, table.begin() + size_t(copy) * dim);  // ties
  std::vector<float> x = random_floats(rows * dim, 42, 2.0f);
  std::fill_n(x.begin() + 2 * dim, dim, 0.0f);
  std::copy_n(x.begin() + 4 * dim, dim, x.begin() + size_t(rows - 1) * dim);
  std::vector<ops::SampleParams> params_of(rows);
  for (uint32_t r = 0; r < rows; ++r) {
    params_of[r] = settings_all[r % settings_all.size()];
    params_of[r].counter = 3 + r;
  }
  params_of[rows - 1] = params_of[4];
  const auto q = bitnet::quantize_rows_int8(table, vocab, dim);
  auto out = [&](uint64_t words, const char* name) { return rt::Buffer(ctx(), std::max<uint64_t>(words * 4, 4), {true, name}); };
  for (uint32_t rows_per_part : {vocab, 2048u}) {
    SCOPED_TRACE(testing::Message() << "rows per part " << rows_per_part);
    const ops::LmHeadSplit split = ops::lm_head_split(t, vocab, dim, rows_per_part);
    auto [f16_parts, int8_parts] = table_parts(table, q, split, vocab, dim);
    rt::Buffer unit = buffer_of(std::vector<float>(dim, 1.0f), "weight");
    rt::Buffer scale = buffer_of(q.scale, "scale"), bound = buffer_of(q.bound, "bound");
    const uint32_t groups = ops::lm_head_bounds_workgroups(t, vocab), stride = vocab + 5;
    auto with = [](std::vector<rt::Arg> args, const char* name, const std::vector<rt::Buffer>& parts) {
      for (size_t i = 0; i < parts.size(); ++i) args.push_back({name + std::to_string(i), parts[i]});
      return args;
    };
    // Each row alone.
    const ops::PlannedPipeline input = ops::make_pipeline(ctx(), ops::plan_lm_head_input(t, dim));
    const ops::PlannedPipeline bounds = ops::make_pipeline(ctx(), ops::plan_lm_head_bounds(t, vocab, dim, rows_per_part));
    const ops::PlannedPipeline list = ops::make_pipeline(ctx(), ops::plan_lm_head_candidate_list(t, vocab, dim, rows_per_part, kK));
    const ops::PlannedPipeline draw = ops::make_pipeline(ctx(), ops::plan_sample_candidate_list(t, kK));
    std::vector<uint32_t> token1, length1;
    std::vector<std::vector<float>> values1;
    std::vector<std::vector<uint32_t>> indices1;
    for (uint32_t r = 0; r < rows; ++r) {
      rt::Buffer raw = buffer_of(std::vector<float>(x.begin() + r * dim, x.begin() + (r + 1) * dim), "x");
      const auto words = params_of[r].pack();
      rt::Buffer params = buffer_of(std::vector<uint32_t>(words.begin(), words.end()), "params");
      rt::Buffer xn = out(dim, "xn"), xq = out(dim / 4, "xq"), stats = out(4, "stats"), upper = out(vocab, "upper"),
                 lower = out(groups, "lower");
      rt::Buffer lv = out(vocab, "lv"), li = out(vocab, "li"), ln = buffer_of(std::vector<uint32_t>{0}, "ln");
      rt::Buffer tv = out(kK, "tv"), ti = out(kK, "ti"), token = out(1, "token"), length = out(1, "length");
      rt::Graph g(ctx());
      input.dispatch(g, {{"x", raw}, {"weight", unit}, {"xn", xn}, {"xq", xq}, {"stats", stats}}, rt::push(1e-5f));
      bounds.dispatch(g, with({{"xq", xq}, {"stats", stats}, {"scale", scale}, {"bound", bound}, {"upper", upper}, {"lower", lower}},
                              "table", int8_parts));
      list.dispatch(g, with({{"x", xn}, {"upper", upper}, {"lower", lower}, {"params", params}, {"list_values", lv},
                             {"list_indices", li}, {"list_count", ln}},
                            "table", f16_parts));
      draw.dispatch(g, {{"list_values", lv}, {"list_indices", li}, {"list_count", ln}, {"params", params}, {"top_values", tv},
                        {"top_indices", ti}, {"token", token}, {"list_length", length}});
      g.submit_and_wait();
      token1.push_back(token.download<uint32_t>()[0]);
      length1.push_back(length.download<uint32_t>()[0]);
      values1.push_back(tv.download<float>());
      indices1.push_back(ti.download<uint32_t>());
    }
    EXPECT_EQ(token1[rows - 1], token1[4]);
    // All rows at once.
    const bool tensor_cores = ops::lm_head_bounds_coopmat_fits(t, vocab, dim, split.parts);
    for (bool coopmat : {false, tensor_cores}) {
      SCOPED_TRACE(testing::Message() << "bounds on tensor cores " << coopmat);
      const uint32_t lower_count = coopmat ? ops::lm_head_bounds_coopmat_workgroups(t, vocab) : groups;
      std::vector<uint32_t> packed;
      for (const auto& p : params_of) {
        const auto words = p.pack();
        packed.insert(packed.end(), words.begin(), words.end());
      }
      rt::Buffer raw = buffer_of(x, "x"), params = buffer_of(packed, "params");
      rt::Buffer xn = out(rows * dim, "xn"), xq = out(rows * dim / 4, "xq"), stats = out(rows * 4, "stats");
      rt::Buffer upper = out(rows * stride, "upper"), lower = out(rows * lower_count, "lower");
      rt::Buffer lv = out(rows * stride, "lv"), li = out(rows * stride, "li"), ln = out(rows, "ln");
      ln.fill(0);
      rt::Buffer tv = out(rows * kK, "tv"), ti = out(rows * kK, "ti"), token = out(rows, "token"), length = out(rows, "length"),
                 best = out(rows, "best");
      const ops::PlannedPipeline input_rows = ops::make_pipeline(ctx(), ops::plan_lm_head_input(t, dim, true));
      const ops::PlannedPipeline bounds_rows = ops::make_pipeline(
          ctx(), coopmat ? ops::plan_lm_head_bounds_coopmat(t, vocab, dim, rows) : ops::plan_lm_head_bounds(t, vocab, dim, rows_per_part, true));
      const ops::PlannedPipeline list_rows =
          ops::make_pipeline(ctx(), ops::plan_lm_head_candidate_list_rows(t, vocab, dim, rows_per_part, kK, lower_count));
      const ops::PlannedPipeline draw_rows = ops::make_pipeline(ctx(), ops::plan_sample_candidate_list_rows(t, kK));
      rt::Graph g(ctx());
      input_rows.dispatch(g, {{"x", raw}, {"weight", unit}, {"xn", xn}, {"xq", xq}, {"stats", stats}}, rt::push(1e-5f), rows);
      bounds_rows.dispatch(g, with({{"xq", xq}, {"stats", stats}, {"scale", scale}, {"bound", bound}, {"upper", upper}, {"lower", lower}},
                                   "table", int8_parts),
                           coopmat ? rt::push(rows, stride) : rt::push(stride), rows);
      list_rows.dispatch(g, with({{"x", xn}, {"upper", upper}, {"lower", lower}, {"params", params}, {"list_values", lv},
                                  {"list_indices", li}, {"list_count", ln}},
                                 "table", f16_parts),
                         rt::push(stride), rows);
      draw_rows.dispatch(g, {{"list_values", lv}, {"list_indices", li}, {"list_count", ln}, {"params", params}, {"top_values", tv},
                             {"top_indices", ti}, {"token", token}, {"list_length", length}, {"best", best}},
                         rt::push(stride), rows);
      g.submit_and_wait();
      token.fill(0xffffffffu);
      g.submit_and_wait();
      const auto tokens = token.download<uint32_t>(), lengths = length.download<uint32_t>(), bests = best.download<uint32_t>();
      const auto counts = ln.download<uint32_t>(), iv = ti.download<uint32_t>();
      const auto vv = tv.download<float>();
      for (uint32_t r = 0; r < rows; ++r) {
        SCOPED_TRACE(testing::Message() << "row " << r);
        EXPECT_EQ(tokens[r], token1[r]);
        EXPECT_EQ(bests[r], indices1[r][0]) << "the list's best";
        EXPECT_EQ(counts[r], 0u) << "the draw leaves the list empty for the next replay";
        if (!coopmat) {
          EXPECT_EQ(lengths[r], length1[r]);
        }
        const ops::SampleParams& s = params_of[r];
        const uint32_t k_wanted = s.inverse_temperature == 0 ? 1 : s.top_k > 0 ? std::min(s.top_k, kK) : kK;
        EXPECT_GE(lengths[r], k_wanted);
        for (uint32_t i = 0; i < k_wanted; ++i) {
          EXPECT_EQ(std::bit_cast<uint32_t>(vv[r * kK + i]), std::bit_cast<uint32_t>(values1[r][i])) << "candidate " << i;
          EXPECT_EQ(iv[r * kK + i], indices1[r][i]) << "candidate " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace bdsl::test
