// token_logprobs against models::token_logprobs (the same formula in double): each asking row's
// token and alternatives with their log-probabilities, in the half its counter picks; rows that do
// not ask, and the other half, are left as they were.
#include <bit>
#include <cmath>

#include "matrix_test.h"
#include "models/logprobs.h"
#include "ops/head/token_logprobs.h"

namespace bdsl::test {
namespace {

constexpr uint32_t kUntouched = 0xdeadbeefu;

class TokenLogprobs : public OpsMatrix {
 protected:
  // Runs the kernel over `rows` (each `vocab` logits, `stride` apart) with the step count `count`;
  // returns the whole out buffer. select[y]: where row y's token is in `sources`.
  std::vector<uint32_t> run_rows(const std::vector<std::vector<float>>& rows, uint32_t stride, uint32_t capacity, uint32_t k,
                                 uint32_t top, const std::vector<uint32_t>& sources, const std::vector<uint32_t>& select,
                                 uint32_t count, uint32_t row_top) {
    const auto vocab = uint32_t(rows[0].size());
    std::vector<float> logits(size_t{stride} * rows.size(), -7.0f);  // between rows: never read
    std::vector<float> top_values(std::max<size_t>(1, size_t{k} * rows.size()));  // one unread word without top-k
    std::vector<uint32_t> top_indices(top_values.size());
    for (size_t y = 0; y < rows.size(); ++y) {
      std::copy(rows[y].begin(), rows[y].end(), logits.begin() + y * stride);
      const models::TokenLogprobs best = models::token_logprobs(rows[y], 0, k);
      for (uint32_t i = 0; i < k; ++i) {
        top_indices[y * k + i] = uint32_t(best.top[i].token);
        top_values[y * k + i] = rows[y][size_t(best.top[i].token)];
      }
    }
    const uint32_t words = ops::token_logprob_words(row_top);
    rt::Buffer counter = buffer_of(std::vector<uint32_t>{count}, "counter");
    rt::Buffer lb = buffer_of(logits, "logits"), sb = buffer_of(sources, "sources"), selb = buffer_of(select, "select");
    rt::Buffer tv = buffer_of(top_values, "top_values"), ti = buffer_of(top_indices, "top_indices");
    rt::Buffer out = buffer_of(std::vector<uint32_t>(2 * capacity * words, kUntouched), "out");
    rt::Pipeline p = pipeline(ops::token_logprobs(target(), vocab, k, top, capacity, row_top));
    rt::Graph g(ctx());
    std::vector<rt::Arg> args = {{"counter", counter}, {"logits", lb}, {"sources", sb}, {"select", selb}};
    if (top) args.insert(args.end(), {{"top_values", tv}, {"top_indices", ti}});
    args.push_back({"out", out});
    g.dispatch(p, args, rt::push(stride), rt::Grid{1, uint32_t(rows.size())});
    g.submit_and_wait();
    return out.download<uint32_t>();
  }
};

void expect_near_logprob(float got, float want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-4 + 1e-5 * std::abs(want)) << what;
}

TEST_F(TokenLogprobs, EachAskingRowGetsItsTokensAndAlternativesInItsHalf) {
  for (uint32_t vocab : {7u, 1000u, 128256u}) {
    SCOPED_TRACE(testing::Message() << "vocab " << vocab);
    const uint32_t stride = (vocab + 15) / 16 * 16, capacity = 4, k = std::min(40u, vocab), top = std::min(20u, k);
    std::vector<std::vector<float>> rows;
    for (uint32_t y = 0; y < 3; ++y) rows.push_back(random_floats(vocab, 11 * vocab + y, 3.0f));
    rows[2][vocab / 2] = 40.0f;  // one row nearly certain: its token's log-probability near 0
    // Row 0's token is its best (the alternatives' first: the same bits twice), row 1's any, row 2
    // asks for nothing.
    const uint32_t best0 = uint32_t(models::token_logprobs(rows[0], 0, 1).top[0].token);
    const std::vector<uint32_t> sources = {99, best0, vocab - 1, vocab / 2};
    const std::vector<uint32_t> select = {1, 2, ops::kNoLogprobs};
    for (uint32_t count : {0u, 5u}) {
      SCOPED_TRACE(testing::Message() << "count " << count);
      const auto out = run_rows(rows, stride, capacity, k, top, sources, select, count, top);
      const uint32_t words = ops::token_logprob_words(top), half = count % 2 * capacity * words;
      for (uint32_t y = 0; y < 2; ++y) {
        const auto token = int32_t(sources[select[y]]);
        const models::TokenLogprobs want = models::token_logprobs(rows[y], token, top);
        const uint32_t at = half + y * words;
        ASSERT_EQ(int32_t(out[at]), token) << "row " << y;
        expect_near_logprob(std::bit_cast<float>(out[at + 1]), want.chosen.logprob, "row " + std::to_string(y));
        for (uint32_t i = 0; i < top; ++i) {
          ASSERT_EQ(int32_t(out[at + 2 + 2 * i]), want.top[i].token) << "row " << y << " rank " << i;
          expect_near_logprob(std::bit_cast<float>(out[at + 3 + 2 * i]), want.top[i].logprob,
                              "row " + std::to_string(y) + " rank " + std::to_string(i));
        }
      }
      EXPECT_EQ(out[half + 1], out[half + 3]) << "row 0's token is its best: the same value twice";
      for (uint32_t i = 0; i < 2 * capacity * words; ++i) {
        if (i < half || i >= half + 2 * words) {
          ASSERT_EQ(out[i], kUntouched) << "word " << i;
        }
      }
    }
  }
}

// Extreme logits: a spread where most exp() underflow, and a flat row (each log(1 / vocab)); no
// alternatives asked (k and top 0, the kernel binds no top-k), rows laid out for 3 (row 1 at word 8).
TEST_F(TokenLogprobs, ExtremeAndFlatRowsWithoutAlternatives) {
  const uint32_t vocab = 5000, stride = 5008;
  std::vector<float> spread = random_floats(vocab, 3, 2000.0f);
  const std::vector<float> flat(vocab, 0.25f);
  const std::vector<uint32_t> sources = {17, 4999};
  const auto out = run_rows({spread, flat}, stride, 2, 0, 0, sources, {0, 1}, 0, 3);
  expect_near_logprob(std::bit_cast<float>(out[1]), models::token_logprobs(spread, 17, 0).chosen.logprob, "spread");
  expect_near_logprob(std::bit_cast<float>(out[9]), -std::log(float(vocab)), "flat");
  EXPECT_EQ(out[8], 4999u);
  for (uint32_t i : {2u, 7u, 10u}) EXPECT_EQ(out[i], kUntouched) << "word " << i;
}

}  // namespace
}  // namespace bdsl::test
