// The scheduler with several slots. Until the batched decode step lands, a BatchDecoder of N
// slots is built here from N copies of the tiny model (one per slot, each with its own KV cache):
// a real decoder whose outputs are those of the model, which also records the calls the
// scheduler makes, so the tests see how it interleaves prefill chunks and batched decode steps.
#include <algorithm>

#include "models/bitnet/batch_decoder.h"
#include "scheduler_fixture.h"

namespace bdsl::test {
namespace {

class ModelPerSlotDecoder final : public models::BatchDecoder {
 public:
  struct Call {
    bool prefill;
    uint32_t slot_or_batch;  // prefill: the slot; decode: the batch size
  };

  ModelPerSlotDecoder(std::vector<std::unique_ptr<bitnet::BitNetModel>> models, uint32_t chunk)
      : models_(std::move(models)), chunk_(chunk) {}

  uint32_t slots() const override { return uint32_t(models_.size()); }
  uint32_t context_length() const override { return models_[0]->context_length(); }
  uint32_t vocab_size() const override { return models_[0]->vocab_size(); }
  uint32_t top_k() const override { return models_[0]->top_k(); }
  uint32_t max_prefill_chunk() const override { return chunk_; }
  uint64_t device_bytes() const override { return 0; }
  bool has_logprobs() const override { return true; }
  uint32_t max_top_logprobs() const override { return kMaxTopLogprobs; }

  models::StepOutput prefill(uint32_t slot, std::span<const int32_t> tokens, uint32_t pos,
                             const models::SamplerOptions& sampling = {}, int32_t logprobs = -1,
                             const models::PromptScoring& scoring = {}) override {
    EXPECT_LE(tokens.size(), chunk_);
    record({true, slot});
    models::StepOutput out =
        scoring.on_scored ? models_.at(slot)->prefill_scored(tokens, pos, scoring) : models_.at(slot)->prefill(tokens, pos);
    out.token = models::choose_after_step(*models_.at(slot), out, sampling, pos + uint32_t(tokens.size()));
    models::logprobs_after_step(*models_.at(slot), out, logprobs);
    return out;
  }
  std::vector<models::StepOutput> decode(std::span<const Entry> batch) override {
    EXPECT_TRUE(!batch.empty() && batch.size() <= slots());
    record({false, uint32_t(batch.size())});
    std::vector<models::StepOutput> out;
    for (const auto& e : batch) {
      out.push_back(models_.at(e.slot)->step(e.token, e.pos));
      out.back().token = models::choose_after_step(*models_.at(e.slot), out.back(), e.sampling, e.pos + 1);
      models::logprobs_after_step(*models_.at(e.slot), out.back(), e.logprobs);
    }
    return out;
  }

  std::vector<Call> calls() {
    std::lock_guard lock(m_);
    return calls_;
  }
  void clear_calls() {
    std::lock_guard lock(m_);
    calls_.clear();
  }

 private:
  void record(Call c) {
    std::lock_guard lock(m_);
    calls_.push_back(c);
  }
  std::vector<std::unique_ptr<bitnet::BitNetModel>> models_;
  uint32_t chunk_;
  std::mutex m_;
  std::vector<Call> calls_;
};

class BatchedScheduler : public SchedulerTest {
 protected:
  ModelPerSlotDecoder& decoder_of(uint32_t slots, uint32_t chunk = 512) {
    std::vector<std::unique_ptr<bitnet::BitNetModel>> models;
    for (uint32_t i = 0; i < slots; ++i) models.push_back(make_model());
    batched_ = std::make_unique<ModelPerSlotDecoder>(std::move(models), chunk);
    return *batched_;
  }
  void TearDown() override {
    batched_.reset();
    SchedulerTest::TearDown();
  }
  std::unique_ptr<ModelPerSlotDecoder> batched_;
};

const std::string kPrompt = "The model reads the prompt and writes";
const std::string kOther = "There were three ships in the harbour";

TEST_F(BatchedScheduler, StreamsDecodeInOneStepAndGiveTheTextTheyGiveAlone) {
  auto& d = decoder_of(2);
  serve::Scheduler s(d, *tokenizer_);
  const std::string a_alone = generate(s, request(kPrompt, 10, 0.9f, 1)).text;
  const std::string b_alone = generate(s, request(kOther, 10, 0.9f, 2)).text;
  d.clear_calls();
  Collector a, b;
  auto ra = request(kPrompt, 10, 0.9f, 1), rb = request(kOther, 10, 0.9f, 2);
  a.attach(ra), b.attach(rb);
  s.submit(std::move(ra));
  s.submit(std::move(rb));
  ASSERT_TRUE(a.wait_end() && b.wait_end());
  EXPECT_EQ(a.text, a_alone);
  EXPECT_EQ(b.text, b_alone);
  const auto calls = d.calls();
  const auto both = std::count_if(calls.begin(), calls.end(), [](auto c) { return !c.prefill && c.slot_or_batch == 2; });
  EXPECT_GE(both, 8) << "both sequences advance in the same decode() while both run";
}

TEST_F(BatchedScheduler, ALongPromptIsPrefilledBetweenDecodeSteps) {
  auto& d = decoder_of(2, 2);  // two prompt tokens per prefill chunk
  serve::Scheduler s(d, *tokenizer_);
  Collector a, b;
  a.hold = true;
  auto ra = request("Hi", 40), rb = request(kPrompt + " " + kOther, 2);
  a.attach(ra), b.attach(rb);
  s.submit(std::move(ra));
  ASSERT_TRUE(a.wait_in_callback());  // the first sequence is generating
  d.clear_calls();
  s.submit(std::move(rb));
  a.release();
  ASSERT_TRUE(b.wait_end() && a.wait_end());
  // While the long prompt is read, chunk by chunk, every turn also decodes the other sequence.
  const auto calls = d.calls();
  const auto chunks = std::count_if(calls.begin(), calls.end(), [](auto c) { return c.prefill; });
  EXPECT_GE(chunks, 8);
  for (size_t i = 1; i < calls.size(); ++i)
    EXPECT_FALSE(calls[i].prefill && calls[i - 1].prefill) << "two prefill chunks in a row at call " << i;
}

TEST_F(BatchedScheduler, CancellingOneStreamLeavesTheOtherAndFreesItsSlot) {
  auto& d = decoder_of(2);
  serve::Scheduler s(d, *tokenizer_, {4});
  const std::string b_alone = generate(s, request(kOther, 20, 0.9f, 5)).text;
  Collector a, b, c;
  a.hold = true;
  auto ra = request(kPrompt, 200), rb = request(kOther, 20, 0.9f, 5), rc = request("Next", 3);
  a.attach(ra), b.attach(rb), c.attach(rc);
  auto ticket = s.submit(std::move(ra));
  ASSERT_TRUE(a.wait_in_callback());
  s.submit(std::move(rb));
  s.submit(std::move(rc));  // waits: both slots are taken
  ticket->cancel();
  a.release();
  ASSERT_TRUE(a.wait_end() && b.wait_end() && c.wait_end());
  EXPECT_EQ(a.reason, FinishReason::Cancelled);
  EXPECT_EQ(b.text, b_alone);
  EXPECT_EQ(c.reason, FinishReason::Length);
  EXPECT_EQ(s.stats().active_slots, 0u);
}

// The batched decoder on the device, its steps pipelined (each step's tokens fed to the next on
// the device, the host a step behind): five requests through three slots, so that slots change
// hands while a step that still holds the last occupant's entry is in flight, give the text and
// token counts each gives alone: greedy and sampled, from one token to several, a prompt that
// runs in the steps and one prefilled first.
TEST_F(BatchedScheduler, PipelinedDeviceStepsGiveEveryRequestItsTextAlone) {
  auto config = models::BitNetConfig::from_gguf(*file_);
  bitnet::ModelOptions o;
  o.top_k = 128;
  auto model = std::make_unique<bitnet::BitNetModel>(ctx(), *file_, config, o);
  bitnet::BitNetBatchDecoder d(ctx(), *model, 3, {.prompt_lanes = 4});
  serve::Scheduler s(d, *tokenizer_, {8});
  std::vector<serve::GenerationRequest> requests = {request(kPrompt, 7, 0.9f, 1), request(kOther, 1), request("Next", 12),
                                                    request(kPrompt + " " + kOther, 3, 1.2f, 3), request("Hi", 9, 0.7f, 4)};
  requests[4].sampling.top_k = 20;
  // The greedy one ends at a stop string from the middle of its text: an end the step already
  // submitted does not know of (its next token is computed and dropped).
  {
    const Collector& c = generate(s, requests[2]);
    ASSERT_GE(c.pieces.size(), 4u);
    requests[2].stop = {c.pieces[c.pieces.size() / 2]};
  }
  std::vector<std::string> alone;
  std::vector<serve::Usage> alone_usage;
  for (const auto& r : requests) {
    const Collector& c = generate(s, r);
    alone.push_back(c.text), alone_usage.push_back(c.usage);
  }
  std::vector<std::unique_ptr<Collector>> together;
  for (auto r : requests) {
    together.push_back(std::make_unique<Collector>());
    together.back()->attach(r);
    s.submit(std::move(r));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(together[i]->wait_end());
    EXPECT_EQ(together[i]->text, alone[i]) << "request " << i;
    EXPECT_EQ(together[i]->usage.completion_tokens, alone_usage[i].completion_tokens) << "request " << i;
    EXPECT_LE(together[i]->usage.completion_tokens, requests[i].max_tokens);
  }
  EXPECT_EQ(alone_usage[1].completion_tokens, 1u);
  EXPECT_LT(alone_usage[2].completion_tokens, requests[2].max_tokens) << "the stop string ended it";
  s.shutdown();
  EXPECT_EQ(s.stats().active_slots, 0u);
}

// A prompt asked for three times in one request (the server's n): its chunks run once for the
// three slots (prefill_shared), and each choice is the text its seed gives alone. A fourth
// request with another prompt, beside them, reads its own.
TEST_F(BatchedScheduler, OnePromptForSeveralChoicesIsReadOnce) {
  auto config = models::BitNetConfig::from_gguf(*file_);
  bitnet::ModelOptions o;
  o.top_k = 128;
  auto model = std::make_unique<bitnet::BitNetModel>(ctx(), *file_, config, o);
  bitnet::BitNetBatchDecoder d(ctx(), *model, 4, {.prompt_lanes = 4});
  serve::Scheduler s(d, *tokenizer_, {8});
  const std::string long_prompt = kPrompt + " " + kOther;
  std::vector<serve::GenerationRequest> choices = {request(long_prompt, 6, 0.9f, 1), request(long_prompt, 6, 0.9f, 2),
                                                   request(long_prompt, 6, 0.0f)};
  const auto other = request(kOther + " " + kPrompt, 5, 0.8f, 3);
  const uint32_t prompt_tokens = uint32_t(choices[0].prompt.size());
  ASSERT_GT(prompt_tokens, d.max_step_prompt()) << "the prompt is prefilled, not run in the steps";
  std::vector<std::string> alone;
  for (const auto& r : choices) alone.push_back(generate(s, r).text);
  const std::string other_alone = generate(s, other).text;
  EXPECT_EQ(s.stats().shared_prompt_tokens, 0u) << "one at a time, every prompt is read";

  const auto before = s.stats();
  std::vector<std::unique_ptr<Collector>> got;
  for (auto& r : choices) got.push_back(std::make_unique<Collector>()), got.back()->attach(r);
  Collector got_other;
  auto r_other = other;
  got_other.attach(r_other);
  s.submit_group(std::move(choices));
  s.submit(std::move(r_other));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i]->wait_end());
    EXPECT_EQ(got[i]->text, alone[i]) << "choice " << i;
    EXPECT_EQ(got[i]->usage.prompt_tokens, prompt_tokens);
  }
  ASSERT_TRUE(got_other.wait_end());
  EXPECT_EQ(got_other.text, other_alone);
  EXPECT_NE(alone[0], alone[1]) << "the seeds draw different texts";
  const auto after = s.stats();
  EXPECT_EQ(after.shared_prompt_tokens - before.shared_prompt_tokens, 2u * prompt_tokens);
  EXPECT_EQ(after.prompt_tokens - before.prompt_tokens, 3u * prompt_tokens + uint32_t(other.prompt.size()));
  EXPECT_EQ(after.prefills - before.prefills, 2u) << "one chunk for the three choices, one for the other prompt";
}

}  // namespace
}  // namespace bdsl::test
