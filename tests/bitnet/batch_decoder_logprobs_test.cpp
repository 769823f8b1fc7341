// Log-probabilities in the batch decoder on the tiny model: each output that asks gets its
// token's and its alternatives' log-softmax, computed on the device from the f32 head's logits,
// within rounding of the single-sequence model's logits taken through models::token_logprobs;
// the same bits alone or beside other sequences; outputs that do not ask get none.
#include <bit>
#include <cmath>

#include "batch_decoder_fixture.h"
#include "models/logprobs.h"

namespace bdsl::test {
namespace {

struct Asked {
  Stream stream;
  int32_t top = -1;  // Entry::logprobs
  std::vector<models::TokenLogprobs> got;  // the prefill's output's, then each step's
  std::vector<std::vector<float>> logits;  // each step's (returned candidates)
};

// Prefills every stream, then decodes them together for `steps` steps, each output asking for
// its stream's log-probabilities.
void run_asking(bitnet::BitNetBatchDecoder& dec, std::vector<Asked>& all, uint32_t steps) {
  for (auto& a : all) {
    const auto out = dec.prefill(a.stream.slot, a.stream.prompt, 0, a.stream.sampling, a.top);
    a.stream.tokens = {out.token};
    ASSERT_EQ(out.logprobs.has_value(), a.top >= 0);
    if (out.logprobs) a.got.push_back(*out.logprobs);
    a.logits.push_back(out.logits);
  }
  for (uint32_t i = 1; i < steps; ++i) {
    std::vector<models::BatchDecoder::Entry> batch;
    for (const auto& a : all) {
      const Stream& s = a.stream;
      batch.push_back({s.slot, s.tokens.back(), uint32_t(s.prompt.size() + s.tokens.size() - 1), s.sampling});
      batch.back().logprobs = a.top;
    }
    const auto outs = dec.decode(batch);
    for (size_t j = 0; j < all.size(); ++j) {
      all[j].stream.tokens.push_back(outs[j].token);
      all[j].logits.push_back(outs[j].logits);
      ASSERT_EQ(outs[j].logprobs.has_value(), all[j].top >= 0) << "step " << i;
      if (!outs[j].logprobs) continue;
      const auto& lp = *outs[j].logprobs;
      EXPECT_EQ(lp.chosen.token, outs[j].token);
      ASSERT_EQ(lp.top.size(), size_t(all[j].top));
      for (size_t r = 0; r + 1 < lp.top.size(); ++r) EXPECT_GE(lp.top[r].logprob, lp.top[r + 1].logprob) << "rank " << r;
      if (!lp.top.empty() && lp.top[0].token == lp.chosen.token) {
        EXPECT_EQ(std::bit_cast<uint32_t>(lp.top[0].logprob), std::bit_cast<uint32_t>(lp.chosen.logprob)) << "the same value twice";
      }
      all[j].got.push_back(lp);
    }
  }
}

void expect_close(float got, float want, const std::string& what) { EXPECT_NEAR(got, want, 1e-4 + 1e-5 * std::abs(want)) << what; }

void expect_logprobs_of(const models::TokenLogprobs& got, std::span<const float> logits, const std::string& what) {
  const auto want = models::token_logprobs(logits, got.chosen.token, uint32_t(got.top.size()));
  expect_close(got.chosen.logprob, want.chosen.logprob, what);
  for (size_t r = 0; r < want.top.size(); ++r) {
    EXPECT_EQ(got.top[r].token, want.top[r].token) << what << " rank " << r;
    expect_close(got.top[r].logprob, want.top[r].logprob, what + " rank " + std::to_string(r));
  }
}

// Greedy, drawn from the top-k, drawn over the vocabulary, and one that asks for nothing, in one
// decoder that returns the logits each output was chosen from: every step's log-probabilities
// are those logits' log-softmax (the prefill's output's, taken on the host, the model's; ids exact, values within rounding of models::token_logprobs in
// double), and the first decode step's logits are the single-sequence model's (the steps after
// follow the batch's own tokens, which may part from the single graph's where an int8 rounding of
// the tiny random model is a near-tie).
TEST_F(BatchDecoder, LogprobsAreTheLogSoftmaxOfTheLogitsTheTokenCameFrom) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 32;
  bitnet::BitNetModel model(ctx(), file, config, o), reference(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 4, {.return_candidates = true});
  ASSERT_TRUE(dec.has_logprobs());
  ASSERT_EQ(dec.max_top_logprobs(), 20u);
  const uint32_t v = config.vocab_size, steps = 8;
  std::vector<Asked> crowd = {{{0, prompt_of(60, 6, v), {}}, 5}, {{1, prompt_of(51, 4, v), {}}, 0},
                              {{2, prompt_of(52, 3, v), {}}, 20}, {{3, prompt_of(53, 5, v), {}}, -1}};
  crowd[1].stream.sampling = {0.9f, 10, 0.95f, 0.0f, 3};
  crowd[2].stream.sampling = {1.2f, 0, 1.0f, 0.0f, 4};
  run_asking(dec, crowd, steps);
  for (size_t j = 0; j < 3; ++j) {
    const Asked& a = crowd[j];
    SCOPED_TRACE(testing::Message() << "stream " << j);
    ASSERT_EQ(a.got.size(), steps);
    for (uint32_t i = 1; i < steps; ++i) {
      ASSERT_EQ(a.logits[i].size(), v) << "step " << i;
      expect_logprobs_of(a.got[i], a.logits[i], "step " + std::to_string(i));
    }
    reference.prefill(a.stream.prompt, 0);
    expect_logprobs_of(a.got[0], reference.logits(), "the prefill's output (on the host)");
    reference.step(a.stream.tokens[0], uint32_t(a.stream.prompt.size()));
    expect_logprobs_of(a.got[1], reference.logits(), "the single-sequence model's first step");
  }
  EXPECT_TRUE(crowd[3].logits[1].empty()) << "no logits where nothing asked for them";

  // The greedy stream alone, in a decoder that returns nothing more: the same tokens and bits.
  bitnet::BatchOptions plain;
  bitnet::BitNetModel second(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder lean(ctx(), second, 4, plain);
  std::vector<Asked> alone = {{{2, prompt_of(60, 6, v), {}}, 5}};
  run_asking(lean, alone, steps);
  EXPECT_EQ(alone[0].stream.tokens, crowd[0].stream.tokens);
  for (uint32_t i = 1; i < steps; ++i) {  // the prefill's output's come from the host
    EXPECT_EQ(std::bit_cast<uint32_t>(alone[0].got[i].chosen.logprob), std::bit_cast<uint32_t>(crowd[0].got[i].chosen.logprob));
    for (size_t r = 0; r < 5; ++r) {
      EXPECT_EQ(alone[0].got[i].top[r].token, crowd[0].got[i].top[r].token);
      EXPECT_EQ(std::bit_cast<uint32_t>(alone[0].got[i].top[r].logprob), std::bit_cast<uint32_t>(crowd[0].got[i].top[r].logprob));
    }
  }
}

// A greedy-only model (no top-k) gives alternatives too (a top-k of their own); more than 20 are
// refused, naming both counts.
TEST_F(BatchDecoder, LogprobAlternativesWithoutTheModelsTopK) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::BitNetModel model(ctx(), file, config);
  ASSERT_EQ(model.top_k(), 0u);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 2, {.return_candidates = true});
  EXPECT_EQ(dec.max_top_logprobs(), 20u);
  std::vector<Asked> both = {{{0, prompt_of(70, 4, config.vocab_size), {}}, 3}, {{1, prompt_of(71, 5, config.vocab_size), {}}, 0}};
  run_asking(dec, both, 4);
  for (const auto& a : both)
    for (uint32_t i = 1; i < 4; ++i) expect_logprobs_of(a.got[i], a.logits[i], "step " + std::to_string(i));
  models::BatchDecoder::Entry e{0, 1, 0, {}};
  e.logprobs = 21;
  try {
    dec.decode(std::span(&e, 1));
    FAIL() << "21 alternatives of 20";
  } catch (const std::invalid_argument& ex) {
    EXPECT_NE(std::string(ex.what()).find("21 alternatives"), std::string::npos) << ex.what();
    EXPECT_NE(std::string(ex.what()).find("at most 20"), std::string::npos) << ex.what();
  }
  const int32_t prompt[] = {1, 2};
  EXPECT_THROW(dec.prefill(1, prompt, 0, {}, 21), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::test
