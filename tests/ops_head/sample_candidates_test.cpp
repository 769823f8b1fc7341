// The device sampler (ops/head/sample_candidates.h) against its host twin, models::Sampler, on
// fixed candidates: token for token over many rows of settings, seeds and positions, and the
// decode graph's form that moves the step state on to its draw.
#include <algorithm>
#include <numeric>
#include <set>

#include "matrix_test.h"
#include "models/sampler.h"
#include "ops/head/sample_candidates.h"

namespace bdsl::test {
namespace {

struct Row {
  std::vector<int32_t> ids;   // distinct, as the top-k kernels give them
  std::vector<float> logits;  // descending
  models::SamplerOptions options;
  uint32_t counter = 0;
};

// k candidates of the vocabulary of 128,256 with logits of the given spread, sorted descending.
Row candidates(uint32_t k, uint32_t seed, float spread) {
  Row r;
  r.logits = random_floats(k, seed, spread);
  std::sort(r.logits.begin(), r.logits.end(), std::greater<>());
  std::set<int32_t> used;
  for (uint32_t i = 0; r.ids.size() < k; ++i) {
    const int32_t id = int32_t(models::philox4x32_10({i, seed, 1, 0}, 99)[0] % 128256u);
    if (used.insert(id).second) r.ids.push_back(id);
  }
  return r;
}

ops::SampleParams params_of(const Row& r) {
  const models::Sampler s(r.options);
  return {s.inverse_temperature(), r.options.top_k, r.options.top_p, r.options.min_p, r.options.seed, r.counter};
}

class SampleCandidates : public OpsMatrix {
 protected:
  // Every row in one dispatch; returns the device's tokens.
  std::vector<uint32_t> sample(const std::vector<Row>& rows, uint32_t k) {
    std::vector<float> values;
    std::vector<uint32_t> indices, params;
    for (const Row& r : rows) {
      values.insert(values.end(), r.logits.begin(), r.logits.end());
      indices.insert(indices.end(), r.ids.begin(), r.ids.end());
      const auto words = params_of(r).pack();
      params.insert(params.end(), words.begin(), words.end());
    }
    rt::Buffer vb = buffer_of(values, "top_values"), ib = buffer_of(indices, "top_indices");
    rt::Buffer pb = buffer_of(params, "params"), token = output(4 * rows.size(), "token");
    const ops::Plan plan = ops::plan_sample_candidates(target(), k, true);
    rt::Pipeline p = pipeline(plan.kernel);
    rt::Graph g(ctx());
    g.dispatch(p, {vb, ib, pb, token}, plan.grid(uint32_t(rows.size())));
    g.submit_and_wait();
    return token.download<uint32_t>();
  }
};

TEST_F(SampleCandidates, PicksWhatTheHostTwinPicksTokenForToken) {
  const uint32_t k = 128;
  const float temperatures[] = {0.0f, 0.3f, 0.8f, 1.5f};
  const uint32_t top_ks[] = {0, 1, 40, 128};
  const float top_ps[] = {1.0f, 0.95f, 0.5f};
  const float min_ps[] = {0.0f, 0.05f};
  const float spreads[] = {0.2f, 2.0f, 8.0f};
  std::vector<Row> rows;
  uint32_t n = 0;
  for (float t : temperatures)
    for (uint32_t top_k : top_ks)
      for (float top_p : top_ps)
        for (float min_p : min_ps)
          for (float spread : spreads)
            for (uint32_t draw = 0; draw < 4; ++draw, ++n) {
              Row r = candidates(k, n % 37, spread);
              r.options = {t, top_k, top_p, min_p, 0x1234567800000000ull + n * 7919ull};
              r.counter = n * 13 + draw;
              rows.push_back(std::move(r));
            }
  const auto got = sample(rows, k);
  uint32_t not_first = 0;
  std::set<uint32_t> distinct;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const int32_t want = models::Sampler(r.options).sample(r.ids, r.logits, r.counter);
    ASSERT_EQ(int32_t(got[i]), want) << "row " << i << ": temperature " << r.options.temperature << " top-k "
                                     << r.options.top_k << " top-p " << r.options.top_p << " min-p " << r.options.min_p;
    not_first += want != r.ids[0];
    distinct.insert(got[i]);
  }
  EXPECT_GT(not_first, rows.size() / 4) << "most draws should not be the greedy choice";
  EXPECT_GT(distinct.size(), 200u);
}

// Fewer candidates than a workgroup (k = 40), and rows that differ only in their counter or seed.
TEST_F(SampleCandidates, EachCounterAndSeedDrawsItsOwnToken) {
  const uint32_t k = 40;
  std::vector<Row> rows;
  for (uint32_t i = 0; i < 400; ++i) {
    Row r = candidates(k, 3, 1.0f);
    r.options = {1.0f, 0, 1.0f, 0.0f, i < 200 ? 77ull : 78ull};
    r.counter = i % 200;
    rows.push_back(std::move(r));
  }
  const auto got = sample(rows, k);
  uint32_t same_seed_differs = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(int32_t(got[i]), models::Sampler(rows[i].options).sample(rows[i].ids, rows[i].logits, rows[i].counter))
        << "row " << i;
    if (i < 200) same_seed_differs += got[i] != got[i + 200];
  }
  EXPECT_GT(same_seed_differs, 100u) << "another seed draws other tokens";
}

// The decode graph's form: the counter is the step's position + 1, and the draw moves the step
// state on (token, pos + 1, epoch + 1) and lands in generated[pos].
TEST_F(SampleCandidates, AdvancesTheStepStateWithTheDraw) {
  const uint32_t k = 64, context = 8;
  Row r = candidates(k, 5, 1.0f);
  r.options = {0.9f, 0, 0.95f, 0.0f, 2024};
  std::vector<uint32_t> indices(r.ids.begin(), r.ids.end());
  rt::Buffer vb = buffer_of(r.logits, "top_values"), ib = buffer_of(indices, "top_indices");
  const auto words = params_of(r).pack();
  rt::Buffer pb = buffer_of(std::vector<uint32_t>(words.begin(), words.end()), "params");
  rt::Buffer token = output(4, "token");
  rt::Buffer step(ctx(), 16, {true, "step"});
  rt::Buffer generated(ctx(), context * 4, {true, "generated"});
  const ops::Plan plan = ops::plan_sample_candidates(target(), k, false, context);
  rt::Pipeline p = pipeline(plan.kernel);
  rt::Graph g(ctx());
  g.dispatch(p, {vb, ib, pb, token, step, generated}, plan.grid());
  std::set<uint32_t> drawn;
  for (uint32_t pos : {0u, 3u, context - 1, context}) {
    generated.upload(std::vector<uint32_t>(context, 77u));
    step.upload(std::vector<uint32_t>{5u, pos, 0u, 9u});
    g.submit_and_wait();
    const uint32_t want = uint32_t(models::Sampler(r.options).sample(r.ids, r.logits, pos + 1));
    EXPECT_EQ(token.download<uint32_t>()[0], want) << "pos " << pos;
    EXPECT_EQ(step.download<uint32_t>(), (std::vector<uint32_t>{want, pos + 1, 0u, 10u})) << "pos " << pos;
    std::vector<uint32_t> expect(context, 77u);
    if (pos < context) expect[pos] = want;
    EXPECT_EQ(generated.download<uint32_t>(), expect) << "pos " << pos;
    drawn.insert(want);
  }
  EXPECT_GT(drawn.size(), 1u) << "each position draws afresh";
}

}  // namespace
}  // namespace bdsl::test
