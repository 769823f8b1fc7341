// Sampled outputs in the batch decoder on the tiny model: each sequence's draws depend on its own
// seed and positions only, and are the single-sequence model's; draws over the vocabulary take
// the f32 head's logits.
#include <set>

#include "batch_decoder_fixture.h"

namespace bdsl::test {
namespace {

// Sampling on the device: each output's token is the host twin's draw from the same candidates
// (checked at every step by run_together), and a sequence sampled beside others, with other
// seeds and settings, draws the same tokens as alone (its draws depend on its seed and positions
// only); with another seed it draws others.
// top_k 0 draws over every logit (ops/head/sample_vocabulary.h), beside a stream that draws from
// its top 10 candidates and a greedy one in the same steps. The full head in f32 (not on tensor
// cores, where x is rounded to F16): its candidates are then the logits the top-k draws take from
// the pruned head's lists, and the host twin's draw from them is the device's.
TEST_F(BatchDecoder, SampledTokensAreTheSameAloneOrBesideOthers) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 32;
  bitnet::BitNetModel model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 5, {.tensor_core_head = false, .return_candidates = true});
  const uint32_t v = config.vocab_size, steps = 16;
  const models::SamplerOptions hot{1.5f, 0, 1.0f, 0.0f, 7};
  std::vector<Stream> alone = {{1, prompt_of(30, 5, v), {}}};
  alone[0].sampling = hot;
  run_together(dec, alone, steps);

  std::vector<Stream> crowd = {{0, prompt_of(31, 8, v), {}}, {2, prompt_of(30, 5, v), {}}, {3, prompt_of(32, 3, v), {}}};
  crowd[0].sampling = {0.8f, 10, 0.9f, 0.05f, 8};
  crowd[1].sampling = hot;
  crowd[2].sampling = {1.5f, 0, 0.9f, 0.0f, 8};  // over the vocabulary with a top-p cut, another seed
  crowd.push_back({4, prompt_of(33, 4, v), {}});  // greedy
  run_together(dec, crowd, steps, 2);
  EXPECT_EQ(crowd[1].tokens, alone[0].tokens);

  std::vector<Stream> reseeded = {{1, prompt_of(30, 5, v), {}}};
  reseeded[0].sampling = {1.5f, 0, 1.0f, 0.0f, 8};
  run_together(dec, reseeded, steps);
  EXPECT_NE(reseeded[0].tokens, alone[0].tokens) << "another seed draws another text";
  std::vector<Stream> greedy = {{1, prompt_of(30, 5, v), {}}};
  run_together(dec, greedy, steps);
  EXPECT_NE(greedy[0].tokens, alone[0].tokens) << "a hot sampler leaves the greedy path";
}

// Draws from the top-k take the pruned head's candidate lists: each sequence's tokens are the
// single-sequence model's decode_sampled (its pruned head: the same exact logits and draw), with
// greedy and whole-vocabulary draws beside it or not (a step with a draw over the vocabulary runs
// the full head too, and its top-k only where returned candidates need it: the same draw either
// way); without the pruned head the batch draws from the full head's top-k, here
// the same tokens (lm_head_batch's logits are lm_head's bits where the head is not on tensor cores).
TEST_F(BatchDecoder, SampledTokensAreTheSingleSequenceModels) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 32;
  bitnet::BitNetModel model(ctx(), file, config, o), reference(ctx(), file, config, o);
  ASSERT_TRUE(reference.pipelines().lm_head_candidate_list) << "the tiny model's shape takes the pruned head";
  bitnet::BitNetBatchDecoder dec(ctx(), model, 4);
  const uint32_t v = config.vocab_size, steps = 14;
  std::vector<Stream> streams = {{0, prompt_of(40, 6, v), {}}, {2, prompt_of(41, 3, v), {}}};
  streams[0].sampling = {0.9f, 20, 0.95f, 0.0f, 11};
  streams[1].sampling = {1.3f, 5, 1.0f, 0.02f, 12};
  run_together(dec, streams, steps, 4);
  auto alone = [&](const Stream& s) {  // the single-sequence model's prefill, then decode_sampled
    auto first = reference.prefill(s.prompt, 0);
    std::vector<int32_t> expected = {models::choose_after_step(reference, first, s.sampling, uint32_t(s.prompt.size()))};
    reference.decode_sampled(expected[0], uint32_t(s.prompt.size()), steps - 1, s.sampling, [&](int32_t t) {
      expected.push_back(t);
      return true;
    });
    return expected;
  };
  for (const auto& s : streams) {
    EXPECT_EQ(s.tokens, alone(s)) << "slot " << s.slot;
    EXPECT_GE(std::set<int32_t>(s.tokens.begin(), s.tokens.end()).size(), 4u) << "a continuation that varies";
  }
  // Beside a greedy stream and one drawn over the whole vocabulary: the same tokens. The draw
  // over the vocabulary is decode_sampled's too (lm_head's f32 logits, on tensor cores as well).
  std::vector<Stream> crowd = {{1, prompt_of(42, 5, v), {}}, {3, prompt_of(40, 6, v), {}}, {0, prompt_of(43, 4, v), {}}};
  crowd[1].sampling = streams[0].sampling;
  crowd[2].sampling = {1.0f, 0, 1.0f, 0.0f, 13};
  run_together(dec, crowd, steps, 4);
  EXPECT_EQ(crowd[1].tokens, streams[0].tokens);
  EXPECT_EQ(crowd[2].tokens, alone(crowd[2])) << "the draw over the vocabulary";
  EXPECT_GE(std::set<int32_t>(crowd[2].tokens.begin(), crowd[2].tokens.end()).size(), 4u) << "a continuation that varies";
  // The draw over the vocabulary the same where its tail also runs the full head's top-k (for the
  // candidates returned: then checked against the host twin's draw too) and where it does not.
  bitnet::BitNetBatchDecoder with_candidates(ctx(), model, 4, {.return_candidates = true});
  std::vector<Stream> vocabulary = {{2, prompt_of(43, 4, v), {}}};
  vocabulary[0].sampling = crowd[2].sampling;
  run_together(with_candidates, vocabulary, steps, 4);
  EXPECT_EQ(vocabulary[0].tokens, crowd[2].tokens);
  // Every logit that draw took is lm_head_batch's f32 arithmetic, on tensor cores or not (the
  // same bits as without them), and within a few ulps of the single-sequence step's (the batch's
  // kernels are not the decode graph's: its logits may differ in the last bits, x in F16 would
  // move them ~100x more).
  bitnet::BitNetBatchDecoder plain(ctx(), model, 4, {.tensor_core_head = false, .return_candidates = true});
  std::vector<Stream> plain_drawn = {{2, prompt_of(43, 4, v), {}}};
  plain_drawn[0].sampling = crowd[2].sampling;
  run_together(plain, plain_drawn, steps, 4);
  const Stream& drawn = vocabulary[0];
  ASSERT_EQ(drawn.logits.size(), size_t(steps - 1));
  ASSERT_EQ(plain_drawn[0].logits.size(), size_t(steps - 1));
  reference.prefill(drawn.prompt, 0);
  for (uint32_t i = 0; i + 1 < steps; ++i) {
    reference.step(drawn.tokens[i], uint32_t(drawn.prompt.size()) + i);
    const auto want = reference.logits();
    ASSERT_EQ(drawn.logits[i].size(), want.size()) << "step " << i;
    for (size_t r = 0; r < want.size(); ++r) {
      ASSERT_EQ(std::bit_cast<uint32_t>(drawn.logits[i][r]), std::bit_cast<uint32_t>(plain_drawn[0].logits[i][r]))
          << "step " << i << " row " << r;
      ASSERT_NEAR(drawn.logits[i][r], want[r], 2e-5f) << "step " << i << " row " << r;
    }
  }
  bitnet::BitNetBatchDecoder full(ctx(), model, 4, {.tensor_core_head = false, .pruned_head = false});
  std::vector<Stream> again = {{1, prompt_of(40, 6, v), {}}};
  again[0].sampling = streams[0].sampling;
  run_together(full, again, steps, 4);
  EXPECT_EQ(again[0].tokens, streams[0].tokens) << "the full head's top-k";
}

}  // namespace
}  // namespace bdsl::test
