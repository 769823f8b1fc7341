// Pipelined batch steps (BatchDecoder::submit / collect) on the tiny model.
#include <deque>

#include "batch_decoder_fixture.h"

namespace bdsl::test {
namespace {

// Pipelined steps (submit() before the step before is collected): each stream's next entry takes
// its token from its output in the step submitted before (Entry::previous), which the host has
// not read yet. The tokens are decode()'s, for greedy, top-k and whole-vocabulary draws, while a
// stream leaves (its last output is then never fed on) and another joins with its prefill's
// token; the steps are collected in order. Out of order, too many at once, or a `previous` that
// names no output: refused.
TEST_F(BatchDecoder, PipelinedStepsGiveDecodesTokens) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 16;
  bitnet::BitNetModel model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 4);
  const uint32_t v = config.vocab_size, steps = 12;
  auto streams_of = [&] {
    std::vector<Stream> s = {{0, prompt_of(50, 5, v), {}}, {1, prompt_of(51, 3, v), {}}, {3, prompt_of(52, 7, v), {}},
                             {2, prompt_of(53, 4, v), {}}};
    s[1].sampling = {0.9f, 8, 0.95f, 0.0f, 21};
    s[2].sampling = {1.2f, 0, 1.0f, 0.0f, 22};
    return s;
  };
  // Synchronous: the first three together, the fourth alone.
  std::vector<Stream> want = streams_of();
  std::vector<Stream> first_three(want.begin(), want.begin() + 3), fourth = {want[3]};
  run_together(dec, first_three, steps);
  run_together(dec, fourth, steps);
  want = {first_three[0], first_three[1], first_three[2], fourth[0]};
  // Pipelined: stream 1 leaves after 6 tokens; stream 3 joins once the first step is in flight.
  std::vector<Stream> got = streams_of();
  std::vector<size_t> stop_at = {steps, 6, steps, steps};
  for (size_t j = 0; j < 3; ++j) got[j].tokens = {dec.prefill(got[j].slot, got[j].prompt, 0, got[j].sampling).token};
  std::deque<std::pair<uint64_t, std::vector<size_t>>> pending;  // ticket, stream of each entry
  std::vector<int32_t> fed_from(4, -1);  // each stream's entry in the step submitted last, or -1
  std::vector<uint32_t> submitted(4, 0);  // tokens each stream has in submitted steps
  bool joined = false;
  auto collect_one = [&] {
    const auto outs = dec.collect(pending.front().first);
    const auto owners = pending.front().second;
    pending.pop_front();
    ASSERT_EQ(outs.size(), owners.size());
    for (size_t i = 0; i < owners.size(); ++i) got[owners[i]].tokens.push_back(outs[i].token);
  };
  for (;;) {
    std::vector<models::BatchDecoder::Entry> batch;
    std::vector<size_t> owners;
    std::vector<int32_t> fed_next(4, -1);
    for (size_t j = 0; j < 4; ++j) {
      Stream& s = got[j];
      if (s.tokens.empty() || 1 + submitted[j] >= stop_at[j]) continue;  // not started, or enough in flight
      models::BatchDecoder::Entry e{s.slot, 0, uint32_t(s.prompt.size() + submitted[j]), s.sampling};
      if (fed_from[j] >= 0) e.previous = fed_from[j];
      else e.token = s.tokens.back();
      fed_next[j] = int32_t(batch.size());
      batch.push_back(e), owners.push_back(j), ++submitted[j];
    }
    if (batch.empty() && pending.empty()) break;
    if (!batch.empty()) {
      if (pending.size() == models::BatchDecoder::kMaxSubmitted) collect_one();
      pending.emplace_back(dec.submit(batch), owners);
    }
    fed_from = fed_next;
    if (!joined) {  // the fourth prefills while the first step is in flight
      got[3].tokens = {dec.prefill(got[3].slot, got[3].prompt, 0).token};
      joined = true;
    }
    if (batch.empty() || pending.size() == models::BatchDecoder::kMaxSubmitted) collect_one();
  }
  for (size_t j = 0; j < 4; ++j) {
    ASSERT_EQ(want[j].tokens.size(), steps);
    const std::vector<int32_t> expected(want[j].tokens.begin(), want[j].tokens.begin() + stop_at[j]);
    EXPECT_EQ(got[j].tokens, expected) << "stream " << j;
  }
  // Refused: a third step in flight, collecting out of order, a `previous` without an output.
  const std::vector<models::BatchDecoder::Entry> one = {{0, 1, 20}};
  const uint64_t a = dec.submit(one), b = dec.submit(one);
  EXPECT_THROW(dec.submit(one), std::logic_error);
  EXPECT_THROW(dec.collect(b), std::logic_error);
  dec.collect(a), dec.collect(b);
  models::BatchDecoder::Entry fed{0, 0, 21};
  fed.previous = 1;
  try {
    dec.submit(std::vector<models::BatchDecoder::Entry>{fed});
    ADD_FAILURE() << "a previous entry past the step before";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has 1 entries"), std::string::npos) << e.what();
  }
  dec.submit(std::vector<models::BatchDecoder::Entry>{{0, 1, 20}, {0, 2, 21}});  // a run: entry 0 has no output
  fed.previous = 0;
  try {
    dec.submit(std::vector<models::BatchDecoder::Entry>{fed});
    ADD_FAILURE() << "a previous entry without an output";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has no output"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bdsl::test
