// The scheduler on a real device (lavapipe in CI): a SequentialDecoder over the tiny synthetic
// model, the same path `bitnet-dsl serve` takes. No HTTP here: requests go straight to submit().
#include "models/generator.h"
#include "models/tokenizer/token_stream.h"
#include "scheduler_fixture.h"

namespace bdsl::test {
namespace {

using Scheduler = SchedulerTest;

const std::string kPrompt = "The model reads the prompt and writes";

TEST_F(Scheduler, GreedyTextIsTheGeneratorsText) {
  auto& d = decoder();
  serve::Scheduler s(d, *tokenizer_);
  const auto& got = generate(s, request(kPrompt, 12));
  EXPECT_EQ(got.reason, FinishReason::Length);
  EXPECT_EQ(got.usage.completion_tokens, 12u);
  EXPECT_EQ(got.usage.prompt_tokens, tokenizer_->encode(kPrompt, true).size());
  s.shutdown();

  models::Generator g(*model_);
  models::GenerateOptions o;
  o.max_new_tokens = 12;
  o.sampling.temperature = 0;
  const auto want = g.generate(tokenizer_->encode(kPrompt, true), o);
  models::TokenStreamDecoder text(*tokenizer_);
  std::string want_text;
  for (int32_t id : want.tokens) want_text += text.push(id);
  EXPECT_EQ(got.text, want_text + text.flush());
}

TEST_F(Scheduler, PromptInSmallChunksIsFullyPrefilled) {
  auto& d = decoder(0, 3);  // a 9-token prompt takes three turns
  serve::Scheduler s(d, *tokenizer_);
  auto r = request(kPrompt, 2);
  const size_t n = r.prompt.size();
  const auto& got = generate(s, std::move(r));
  EXPECT_EQ(got.reason, FinishReason::Length);
  EXPECT_EQ(s.stats().prompt_tokens, n);
  EXPECT_EQ(s.stats().generated_tokens, 2u);
}

TEST_F(Scheduler, SameSeedSameTextAloneOrBesideAnotherRequest) {
  auto& d = decoder();
  serve::Scheduler s(d, *tokenizer_);
  const std::string alone = generate(s, request(kPrompt, 16, 0.9f, 7)).text;
  Collector a, b;
  auto ra = request(kPrompt, 16, 0.9f, 7), rb = request("There were three ships", 16, 0.9f, 8);
  a.attach(ra), b.attach(rb);
  s.submit(std::move(rb));
  s.submit(std::move(ra));
  ASSERT_TRUE(a.wait_end() && b.wait_end());
  EXPECT_EQ(a.text, alone);
  EXPECT_NE(b.text, alone);
}

TEST_F(Scheduler, StopStringEndsTheTextAndIsNotReturned) {
  auto& d = decoder();
  serve::Scheduler s(d, *tokenizer_);
  const std::string full = generate(s, request(kPrompt, 24)).text;
  // Two letters from inside the greedy text (not at its start, so some text comes before).
  size_t at = 1;
  while (at + 3 < full.size() && !(isalpha(uint8_t(full[at])) && isalpha(uint8_t(full[at + 1])))) ++at;
  ASSERT_LT(at + 3, full.size()) << full;
  const std::string stop = full.substr(at, 2);
  auto r = request(kPrompt, 24);
  r.stop = {stop};
  const auto& got = generate(s, std::move(r));
  EXPECT_EQ(got.reason, FinishReason::Stop);
  EXPECT_EQ(got.text, full.substr(0, full.find(stop)));
  EXPECT_EQ(got.text.find(stop), std::string::npos);
}

TEST_F(Scheduler, FullContextEndsWithLength) {
  auto& d = decoder(16);
  serve::Scheduler s(d, *tokenizer_);
  auto r = request(kPrompt, 100);
  const uint32_t n = uint32_t(r.prompt.size());
  const auto& got = generate(s, std::move(r));
  EXPECT_EQ(got.reason, FinishReason::Length);
  // The last token decoded went to position 15; the one sampled from it ends the sequence.
  EXPECT_EQ(got.usage.completion_tokens, 16 - n + 1);
  EXPECT_THROW(s.submit(request(std::string(200, 'x'), 4)), std::length_error);
}

TEST_F(Scheduler, FullQueueRefusesAndCancellationFreesTheSlot) {
  auto& d = decoder();
  serve::Scheduler s(d, *tokenizer_, {1});
  Collector running, waiting;
  running.hold = true;
  auto r1 = request(kPrompt, 200), r2 = request("There were three ships", 3);
  running.attach(r1), waiting.attach(r2);
  auto ticket = s.submit(std::move(r1));
  ASSERT_TRUE(running.wait_in_callback());  // the worker is inside the running request: it holds the slot
  s.submit(std::move(r2));
  EXPECT_THROW(s.submit(request("one too many", 3)), serve::QueueFull);
  EXPECT_EQ(s.stats().queue_length, 1u);
  EXPECT_EQ(s.stats().active_slots, 1u);
  EXPECT_EQ(s.stats().requests_rejected, 1u);
  ticket->cancel();
  running.release();
  ASSERT_TRUE(running.wait_end());
  EXPECT_EQ(running.reason, FinishReason::Cancelled);
  EXPECT_LT(running.usage.completion_tokens, 5u) << "cancelled at the next turn, not after 200 tokens";
  ASSERT_TRUE(waiting.wait_end());
  EXPECT_EQ(waiting.reason, FinishReason::Length);
  EXPECT_EQ(s.stats().requests_cancelled, 1u);
  EXPECT_EQ(s.stats().active_slots, 0u);
}

// One HTTP request's choices are queued together or not at all.
TEST_F(Scheduler, AGroupIsQueuedWholeOrNotAtAll) {
  auto& d = decoder();
  serve::Scheduler s(d, *tokenizer_, {2});
  Collector running, waiting, grouped[2];
  running.hold = true;
  auto r1 = request(kPrompt, 200), r2 = request("There were three ships", 3);
  running.attach(r1), waiting.attach(r2);
  auto ticket = s.submit(std::move(r1));
  ASSERT_TRUE(running.wait_in_callback());
  s.submit(std::move(r2));  // one of the two waiting places
  std::vector<serve::GenerationRequest> pair(2, request("A pair", 2));
  for (int i = 0; i < 2; ++i) grouped[i].attach(pair[i]);
  EXPECT_THROW(s.submit_group(pair), serve::QueueFull);
  EXPECT_EQ(s.stats().queue_length, 1u) << "neither of the pair was queued";
  EXPECT_THROW(s.submit_group(std::vector<serve::GenerationRequest>(3, request("Three", 2))), std::invalid_argument)
      << "more than the queue ever holds";
  auto bad = pair;
  bad[1].prompt.clear();
  EXPECT_THROW(s.submit_group(bad), std::invalid_argument);
  EXPECT_EQ(s.stats().queue_length, 1u);
  ticket->cancel();
  running.release();
  ASSERT_TRUE(waiting.wait_end());
  const auto tickets = s.submit_group(pair);  // room now
  EXPECT_EQ(tickets.size(), 2u);
  for (auto& g : grouped) {
    ASSERT_TRUE(g.wait_end());
    EXPECT_EQ(g.reason, FinishReason::Length);
  }
  EXPECT_EQ(grouped[0].text, grouped[1].text) << "the same prompt and seed";
}

TEST_F(Scheduler, ShutdownEndsRunningAndWaitingRequests) {
  auto& d = decoder();
  serve::Scheduler s(d, *tokenizer_);
  Collector running, waiting;
  running.hold = true;
  auto r1 = request(kPrompt, 200), r2 = request(kPrompt, 3);
  running.attach(r1), waiting.attach(r2);
  s.submit(std::move(r1));
  ASSERT_TRUE(running.wait_in_callback());
  s.submit(std::move(r2));
  std::thread stopper([&] { s.shutdown(); });
  running.release();
  stopper.join();
  EXPECT_EQ(running.reason, FinishReason::Shutdown);
  EXPECT_EQ(waiting.reason, FinishReason::Shutdown);
  EXPECT_THROW(s.submit(request(kPrompt, 3)), serve::ShuttingDown);
}

// Log-probabilities on the one-slot path (from the model's logits, on the host): one per generated
// token, the generator's greedy tokens in order, each the most likely; none where not asked.
TEST_F(Scheduler, LogprobsOfEveryGeneratedToken) {
  auto& d = decoder();
  serve::Scheduler s(d, *tokenizer_);
  std::vector<models::TokenLogprobs> got;
  auto r = request(kPrompt, 10);
  r.logprobs = 3;
  r.on_logprobs = [&](const models::TokenLogprobs& lp) { got.push_back(lp); };  // the worker's thread; read after the end
  const auto& end = generate(s, std::move(r));
  ASSERT_EQ(got.size(), end.usage.completion_tokens - (end.reason == FinishReason::Stop ? 1 : 0));
  models::Generator g(*model_);
  models::GenerateOptions o;
  o.max_new_tokens = 10;
  o.sampling.temperature = 0;
  const auto want = g.generate(tokenizer_->encode(kPrompt, true), o);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].chosen.token, want.tokens[i]) << i;
    ASSERT_EQ(got[i].top.size(), 3u);
    EXPECT_EQ(got[i].top[0].token, got[i].chosen.token) << i;
    EXPECT_EQ(got[i].top[0].logprob, got[i].chosen.logprob) << i;
    EXPECT_LE(got[i].chosen.logprob, 0.0f);
  }
  std::vector<models::TokenLogprobs> none;
  auto plain = request(kPrompt, 4);
  plain.on_logprobs = [&](const models::TokenLogprobs& lp) { none.push_back(lp); };
  generate(s, std::move(plain));
  EXPECT_TRUE(none.empty());
  auto too_many = request(kPrompt, 3);
  too_many.logprobs = 21;
  EXPECT_THROW(s.submit(std::move(too_many)), std::invalid_argument);

  // With the prompt's: entry i scores prompt token i + 1 from the logits of position i, then the
  // generated tokens' as before.
  std::vector<models::TokenLogprobs> scored;
  auto echo = request(kPrompt, 2);
  echo.logprobs = 2;
  echo.prompt_logprobs = true;
  echo.on_logprobs = [&](const models::TokenLogprobs& lp) { scored.push_back(lp); };
  const auto prompt = echo.prompt;
  generate(s, std::move(echo));
  s.shutdown();
  ASSERT_EQ(scored.size(), prompt.size() - 1 + 2);
  auto fresh = make_model();
  fresh->prefill_all_logits(prompt, 0, [&](uint32_t i, std::span<const float> logits) {
    if (i + 1 == prompt.size()) return;
    const auto expected = models::token_logprobs(logits, prompt[i + 1], 2);
    EXPECT_EQ(scored[i].chosen.token, prompt[i + 1]) << i;
    // Scored on the device (f32 sums in a fixed order) against the host's double.
    EXPECT_NEAR(scored[i].chosen.logprob, expected.chosen.logprob, 1e-4 + 1e-5 * std::abs(expected.chosen.logprob)) << i;
    EXPECT_EQ(scored[i].top[0].token, expected.top[0].token) << i;
  });
  EXPECT_EQ(scored[prompt.size() - 1].chosen.token, got[0].chosen.token) << "then the generated tokens'";
}

TEST_F(Scheduler, RejectsRequestsItCannotRun) {
  auto& d = decoder();
  serve::Scheduler s(d, *tokenizer_);
  auto empty = request(kPrompt, 3);
  empty.prompt.clear();
  EXPECT_THROW(s.submit(std::move(empty)), std::invalid_argument);
  auto r = request(kPrompt, 0);
  EXPECT_THROW(s.submit(std::move(r)), std::invalid_argument);
  auto bad_id = request(kPrompt, 3);
  bad_id.prompt.push_back(5000);
  EXPECT_THROW(s.submit(std::move(bad_id)), std::invalid_argument);
  auto bad_p = request(kPrompt, 3, 1.0f);
  bad_p.sampling.top_p = 0;
  EXPECT_THROW(s.submit(std::move(bad_p)), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::test
