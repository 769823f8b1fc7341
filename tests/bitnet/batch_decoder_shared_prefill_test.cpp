// A prompt chunk that several slots take alike (BatchDecoder::prefill_shared, what the server's n
// choices of one prompt take): each slot's first output and every step after it are the ones
// that slot gets from prefill() alone.
#include <bit>

#include "batch_decoder_fixture.h"

namespace bdsl::test {
namespace {

void expect_same_logprobs(const std::optional<models::TokenLogprobs>& got, const std::optional<models::TokenLogprobs>& want,
                          const std::string& what) {
  ASSERT_EQ(got.has_value(), want.has_value()) << what;
  if (!want) return;
  EXPECT_EQ(got->chosen.token, want->chosen.token) << what;
  EXPECT_EQ(std::bit_cast<uint32_t>(got->chosen.logprob), std::bit_cast<uint32_t>(want->chosen.logprob)) << what;
  ASSERT_EQ(got->top.size(), want->top.size()) << what;
  for (size_t i = 0; i < want->top.size(); ++i) EXPECT_EQ(got->top[i].token, want->top[i].token) << what;
}

// Three sharers (greedy, and two seeds of one hot sampler, one asking for log-probabilities) read
// an 11-token prompt in chunks of 4 at once, in slots that held other sequences before; then they
// decode together. Each gets the tokens, candidates and log-probabilities it gets alone.
TEST_F(BatchDecoder, ASharedPromptGivesEachSlotWhatItsOwnPrefillGives) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 32;
  bitnet::BitNetModel model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 4, {.tensor_core_head = false, .return_candidates = true});
  const uint32_t v = config.vocab_size, steps = 10, chunk = 4;
  const std::vector<int32_t> prompt = prompt_of(40, 11, v);
  std::vector<models::BatchDecoder::Sharer> sharers = {
      {3, {}, -1}, {1, {1.5f, 0, 1.0f, 0.0f, 7}, 3}, {2, {1.2f, 20, 0.9f, 0.0f, 8}, -1}};

  std::vector<Stream> alone;
  std::vector<models::StepOutput> alone_first;
  for (const auto& s : sharers) {
    Stream& st = alone.emplace_back(Stream{0, prompt, {}});
    st.sampling = s.sampling;
    const models::StepOutput out = prefill_in_chunks(dec, 0, prompt, chunk, s.sampling, s.logprobs);
    st.tokens = {out.token};
    alone_first.push_back(out);
    std::vector<Stream> one = {st};
    decode_together(dec, one, steps);
    st = one[0];
  }

  // Other sequences in the sharers' slots first: their rows must not show through.
  std::vector<Stream> before = {{1, prompt_of(41, 12, v), {}}, {2, prompt_of(42, 6, v), {}}, {3, prompt_of(43, 9, v), {}}};
  run_together(dec, before, 3);

  std::vector<models::StepOutput> first;
  for (uint32_t at = 0; at < prompt.size(); at += chunk) {
    const uint32_t n = std::min<uint32_t>(chunk, uint32_t(prompt.size()) - at);
    first = dec.prefill_shared(sharers, std::span(prompt).subspan(at, n), at);
    ASSERT_EQ(first.size(), sharers.size());
  }
  std::vector<Stream> together;
  for (size_t i = 0; i < sharers.size(); ++i) {
    const std::string what = "sharer " + std::to_string(i);
    EXPECT_EQ(first[i].token, alone_first[i].token) << what;
    EXPECT_EQ(first[i].top_ids, alone_first[i].top_ids) << what;
    expect_same_logprobs(first[i].logprobs, alone_first[i].logprobs, what);
    Stream& st = together.emplace_back(Stream{sharers[i].slot, prompt, {first[i].token}});
    st.sampling = sharers[i].sampling;
  }
  decode_together(dec, together, steps);
  for (size_t i = 0; i < sharers.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "sharer " << i;
    ASSERT_EQ(together[i].top_logits.size(), alone[i].top_logits.size());
    for (size_t s = 0; s < alone[i].top_logits.size(); ++s)
      for (size_t j = 0; j < alone[i].top_logits[s].size(); ++j)
        EXPECT_EQ(std::bit_cast<uint32_t>(together[i].top_logits[s][j]), std::bit_cast<uint32_t>(alone[i].top_logits[s][j]))
            << "sharer " << i << " step " << s << " candidate " << j;
  }
  EXPECT_NE(together[1].tokens, together[2].tokens) << "the sharers' own samplers draw their own texts";

  // Sharers that name a slot twice or one past the decoder's are refused, naming it.
  std::vector<models::BatchDecoder::Sharer> twice = {{1, {}, -1}, {1, {}, -1}};
  EXPECT_THROW(dec.prefill_shared(twice, std::span(prompt).first(2), 0), std::invalid_argument);
  std::vector<models::BatchDecoder::Sharer> past = {{0, {}, -1}, {4, {}, -1}};
  EXPECT_THROW(dec.prefill_shared(past, std::span(prompt).first(2), 0), std::out_of_range);
  EXPECT_THROW(dec.prefill_shared({}, std::span(prompt).first(2), 0), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::test
