// A prompt's own tokens scored on the device (BitNetModel::prefill_scored, a server's `echo` with
// `logprobs`) on the tiny model: each scored row is the log-softmax of the row's logits that
// prefill_all_logits gives, as the host twin computes it (models::token_logprobs).
#include <cmath>
#include <optional>

#include "device_test.h"
#include "temp_dir.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/bitnet_model.h"
#include "models/logprobs.h"

namespace bdsl::test {
namespace {

class PromptScoring : public DeviceTest {
 protected:
  static void SetUpTestSuite() {
    dir_.emplace("prompt_scoring");
    golden::write_synthetic_model(golden::synthetic_preset("tiny"), *dir_ / "tiny.gguf");
  }
  static void TearDownTestSuite() { dir_.reset(); }
  inline static std::optional<TempDir> dir_;
};

void expect_near_logprob(float got, float want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-4 + 1e-5 * std::abs(want)) << what;  // f32 sums in a fixed order against double
}

// Every row with a next token is scored, in order (a row without one is skipped); its token, its
// value and its alternatives (ids in the host's order, values) are the host twin's of the row's
// logits; the last token's output is prefill()'s. Two groups of logit rows (the second partial),
// with no alternatives, a few, and the most.
TEST_F(PromptScoring, EachRowIsTheLogSoftmaxOfItsLogits) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 16;
  bitnet::BitNetModel model(ctx(), file, config, o);
  std::vector<int32_t> tokens(45);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7919 + 5) % config.vocab_size);
  std::vector<std::vector<float>> rows;
  model.prefill_all_logits(tokens, 0, [&](uint32_t, std::span<const float> l) { rows.emplace_back(l.begin(), l.end()); });
  const models::StepOutput plain = model.prefill(tokens, 0);
  std::vector<int32_t> next(tokens.size(), -1);
  for (size_t i = 0; i + 1 < tokens.size(); ++i) next[i] = tokens[i + 1];
  next[5] = -1;    // not scored
  next[40] = 3;    // any token may be scored, not only the prompt's next
  for (uint32_t top : {0u, 3u, 20u}) {
    SCOPED_TRACE(testing::Message() << "top " << top);
    std::vector<uint32_t> seen;
    const models::StepOutput out = model.prefill_scored(tokens, 0, {next, top, [&](uint32_t row, const models::TokenLogprobs& lp) {
      seen.push_back(row);
      const auto want = models::token_logprobs(rows[row], next[row], top);
      ASSERT_EQ(lp.chosen.token, next[row]) << "row " << row;
      expect_near_logprob(lp.chosen.logprob, want.chosen.logprob, "row " + std::to_string(row));
      ASSERT_EQ(lp.top.size(), size_t(top)) << "row " << row;
      for (uint32_t i = 0; i < top; ++i) {
        EXPECT_EQ(lp.top[i].token, want.top[i].token) << "row " << row << " rank " << i;
        expect_near_logprob(lp.top[i].logprob, want.top[i].logprob, "row " + std::to_string(row) + " rank " + std::to_string(i));
      }
    }});
    std::vector<uint32_t> want_seen;
    for (uint32_t i = 0; i < next.size(); ++i)
      if (next[i] >= 0) want_seen.push_back(i);
    EXPECT_EQ(seen, want_seen);
    EXPECT_EQ(out.logits, rows.back()) << "the last row's logits";
    EXPECT_EQ(out.argmax, plain.argmax);
    EXPECT_EQ(out.top_ids, plain.top_ids) << "the host's top-k order is the device's";
    EXPECT_EQ(out.top_logits, plain.top_logits);
  }
}

TEST_F(PromptScoring, RefusesScoringThatDoesNotFitThePrompt) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::BitNetModel model(ctx(), file, config);
  const std::vector<int32_t> tokens = {1, 2, 3};
  auto ignore = [](uint32_t, const models::TokenLogprobs&) {};
  const std::vector<int32_t> short_next = {2, 3}, outside = {2, int32_t(config.vocab_size), -1}, fine = {2, 3, -1};
  EXPECT_THROW(model.prefill_scored(tokens, 0, {short_next, 0, ignore}), std::invalid_argument);
  EXPECT_THROW(model.prefill_scored(tokens, 0, {outside, 0, ignore}), std::invalid_argument);
  EXPECT_THROW(model.prefill_scored(tokens, 0, {fine, models::kMaxTopLogprobs + 1, ignore}), std::invalid_argument);
  EXPECT_THROW(model.prefill_scored(tokens, 0, {fine, 0, {}}), std::invalid_argument) << "no callback";
  EXPECT_NO_THROW(model.prefill_scored(tokens, 0, {fine, models::kMaxTopLogprobs, ignore}));
}

}  // namespace
}  // namespace bdsl::test
