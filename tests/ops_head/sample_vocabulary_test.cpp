// The draw over the whole vocabulary (ops/head/sample_vocabulary.h) against its host twin,
// models::Sampler::sample_vocabulary, token for token: many rows of settings, seeds and positions
// over 128,256 logits (flat and peaked, so the nucleus holds from one token to most of the
// vocabulary), logits with many ties at the top-p boundary, and rows on a logits stride.
#include <algorithm>
#include <set>

#include "matrix_test.h"
#include "models/sampler.h"
#include "ops/head/argmax.h"
#include "ops/head/sample_candidates.h"
#include "ops/head/sample_vocabulary.h"

namespace bdsl::test {
namespace {

constexpr uint32_t kUntouched = 0xdeadbeefu;  // a token the kernels did not write

struct Row {
  std::vector<float> logits;
  models::SamplerOptions options;
  uint32_t counter = 0;
};

class SampleVocabulary : public OpsMatrix {
 protected:
  // Every row in one recording of the whole chain (argmax, three radix passes, the draw), its
  // logits `stride` floats apart; returns the device's tokens.
  std::vector<uint32_t> sample(const std::vector<Row>& rows, uint32_t vocab, uint32_t stride) {
    const uint32_t n = uint32_t(rows.size());
    std::vector<float> logits(size_t{n} * stride, -1e30f);  // past the vocabulary: never read
    std::vector<uint32_t> params;
    for (uint32_t r = 0; r < n; ++r) {
      std::copy(rows[r].logits.begin(), rows[r].logits.end(), logits.begin() + size_t{r} * stride);
      const models::Sampler s(rows[r].options);
      const auto& o = rows[r].options;
      const auto words = ops::SampleParams{s.inverse_temperature(), o.top_k, o.top_p, o.min_p, o.seed, rows[r].counter}.pack();
      params.insert(params.end(), words.begin(), words.end());
    }
    const uint32_t groups = ops::vocab_sampling_groups(target(), vocab);
    const uint32_t arg_groups = ops::argmax_plan(target(), vocab).groups;
    rt::Buffer lb = buffer_of(logits, "logits"), pb = buffer_of(params, "params");
    rt::Buffer state = buffer_of(std::vector<uint32_t>(size_t{n} * ops::kVocabStateWords, 0u), "state");
    rt::Buffer mass = buffer_of(std::vector<uint32_t>(size_t{n} * 2 * ops::kVocabBuckets, 0u), "mass");
    rt::Buffer best = output(4ull * n, "best");
    rt::Buffer token = buffer_of(std::vector<uint32_t>(n, kUntouched), "token");
    rt::Buffer arg_values = output(4ull * n * arg_groups, "arg values"), arg_indices = output(4ull * n * arg_groups, "arg indices");
    rt::Buffer part_values = output(4ull * n * groups, "part values"), part_indices = output(4ull * n * groups, "part indices");
    std::vector<ops::Plan> plans = {ops::plan_argmax_partial(target(), vocab, true), ops::plan_argmax_final(target(), vocab, 0, true)};
    for (uint32_t pass = 0; pass < ops::kVocabPasses; ++pass) {
      plans.push_back(ops::plan_vocab_mass_histogram(target(), vocab, pass));
      plans.push_back(ops::plan_vocab_mass_select(target(), pass));
    }
    plans.push_back(ops::plan_vocab_draw_partial(target(), vocab));
    plans.push_back(ops::plan_vocab_draw_final(target(), vocab));
    std::vector<rt::Pipeline> p;
    for (const auto& plan : plans) p.push_back(pipeline(plan.kernel));
    rt::Graph g(ctx());
    g.dispatch(p[0], {lb, arg_values, arg_indices}, rt::push(stride), plans[0].grid(n));
    g.dispatch(p[1], {arg_values, arg_indices, best}, {}, plans[1].grid(n));
    for (uint32_t pass = 0; pass < ops::kVocabPasses; ++pass) {
      g.dispatch(p[2 + 2 * pass], {lb, best, pb, state, mass}, rt::push(stride), plans[2 + 2 * pass].grid(n));
      g.dispatch(p[3 + 2 * pass], {pb, mass, state}, {}, plans[3 + 2 * pass].grid(n));
    }
    g.dispatch(p[8], {lb, best, pb, state, part_values, part_indices}, rt::push(stride), plans[8].grid(n));
    g.dispatch(p[9], {part_values, part_indices, pb, token}, {}, plans[9].grid(n));
    g.submit_and_wait();
    // Each select leaves its buckets zero: a second replay starts clean.
    const auto left = mass.download<uint32_t>();
    EXPECT_EQ(std::count(left.begin(), left.end(), 0u), ptrdiff_t(left.size())) << "the buckets are left zero";
    return token.download<uint32_t>();
  }

  void expect_host_twin(const std::vector<Row>& rows, uint32_t vocab, uint32_t stride, uint32_t distinct_at_least) {
    const auto got = sample(rows, vocab, stride);
    std::set<uint32_t> distinct;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      // Greedy rows and top-k rows are left to the argmax and sample_candidates.
      const bool here = r.options.temperature > 0 && r.options.top_k == 0;
      const int32_t want = here ? models::Sampler(r.options).sample_vocabulary(r.logits, r.counter) : int32_t(kUntouched);
      ASSERT_EQ(int32_t(got[i]), want) << "row " << i << ": temperature " << r.options.temperature << " top-k " << r.options.top_k << " top-p "
                                       << r.options.top_p << " min-p " << r.options.min_p;
      distinct.insert(got[i]);
    }
    EXPECT_GE(distinct.size(), distinct_at_least);
  }
};

// Normal logits of the given spread, a few of them lifted far above the rest when `peaked`.
std::vector<float> vocabulary_logits(uint32_t vocab, uint32_t seed, float spread, bool peaked) {
  auto l = random_floats(vocab, seed, spread);
  if (peaked)
    for (uint32_t i = 0; i < 5; ++i) l[(seed * 7919u + i * 104729u) % vocab] += 12.0f - 2.0f * float(i);
  return l;
}

TEST_F(SampleVocabulary, PicksWhatTheHostTwinPicksTokenForToken) {
  const uint32_t vocab = 128256;
  const float temperatures[] = {0.0f, 0.7f, 1.5f};  // greedy rows: left alone
  const float top_ps[] = {1.0f, 0.95f, 0.5f, 0.05f};
  const float min_ps[] = {0.0f, 0.05f};
  std::vector<Row> rows;
  uint32_t n = 0;
  for (float t : temperatures)
    for (float top_p : top_ps)
      for (float min_p : min_ps)
        for (uint32_t shape = 0; shape < 3; ++shape, ++n) {
          const uint32_t top_k = n % 11 == 5 ? 40 : 0;  // a few top-k rows among them: left alone
          Row r{vocabulary_logits(vocab, n, shape == 0 ? 1.0f : 3.0f, shape == 2), {t, top_k, top_p, min_p, 0xabcdef00ull + n}, n * 31};
          rows.push_back(std::move(r));
        }
  expect_host_twin(rows, vocab, vocab, 20);
}

// Logits on a grid of 1/4 (hundreds of tokens share each value, so the top-p boundary falls inside
// a tie), -0 and +0 among them, rows 1,000 floats apart past a small vocabulary, many counters.
TEST_F(SampleVocabulary, TiesAtTheBoundaryAndRowsOnAStride) {
  const uint32_t vocab = 3000, stride = 4000;
  std::vector<Row> rows;
  for (uint32_t i = 0; i < 96; ++i) {
    Row r;
    r.logits = random_floats(vocab, 100 + i % 4, 2.0f);
    for (float& x : r.logits) x = std::round(x * 4.0f) / 4.0f;
    r.logits[7] = -0.0f;
    r.logits[8] = 0.0f;
    r.options = {1.0f, 0, i % 3 == 0 ? 0.3f : i % 3 == 1 ? 0.9f : 0.999f, i % 2 ? 0.0f : 0.01f, 5};
    r.counter = i;
    rows.push_back(std::move(r));
  }
  expect_host_twin(rows, vocab, stride, 30);
}

}  // namespace
}  // namespace bdsl::test
