// The repeat penalty (ops/head/repeat_penalty.h) against its host twin, models::apply_repeat_penalty,
// bit for bit: windows that repeat tokens, windows longer than the positions so far, a window past
// the workgroup, penalties above and below 1; replays with new parameters, and the history it writes.
#include <random>

#include "matrix_test.h"
#include "models/sampler.h"
#include "ops/common/step_state.h"
#include "ops/head/repeat_penalty.h"

namespace bdsl::test {
namespace {

using RepeatPenalty = OpsMatrix;

TEST_F(RepeatPenalty, EachTokenOfTheWindowOnceAsTheHostTwin) {
  const uint32_t vocab = 3000, context = 2048;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-8.0f, 8.0f);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = value(rng);
  logits[5] = 0.0f;
  // Positions 0..1999 of a sequence that repeats a few tokens often.
  std::vector<uint32_t> history(context, 0);
  std::uniform_int_distribution<uint32_t> token(0, vocab - 1), common(0, 9);
  for (uint32_t q = 0; q < 2000; ++q) history[q] = q % 3 ? common(rng) : token(rng);
  rt::Buffer lb = buffer_of(logits, "logits"), hb = buffer_of(history, "history");
  rt::Buffer step = buffer_of(std::vector<uint32_t>{5, 0, 0, 1}, "step");
  const ops::Plan plan = ops::plan_repeat_penalty(target(), vocab, context);
  rt::Pipeline p = pipeline(plan.kernel);
  rt::Graph g(ctx());
  auto penalty = g.parameter(1.0f), inverse = g.parameter(1.0f);
  auto last_n = g.parameter<uint32_t>(0);
  g.dispatch(p, {lb, step, hb}, rt::push(penalty, inverse, last_n), plan.grid());
  struct Case {
    uint32_t token, pos, last_n;
    float penalty;
  };
  for (const Case c : {Case{5, 0, 64, 1.3f}, Case{17, 40, 64, 1.5f}, Case{3, 1999, 64, 0.7f}, Case{3, 1999, 1024, 1.1f},
                       Case{2999, 900, 300, 2.0f}, Case{8, 10, 0, 2.0f}}) {
    history[c.pos] = c.token;  // what the dispatch writes, and the window's first token
    std::vector<int32_t> window;
    for (uint32_t j = 0; j < std::min(c.last_n, c.pos + 1); ++j) window.push_back(int32_t(history[c.pos - j]));
    std::vector<float> want = logits;
    models::apply_repeat_penalty(want, window, c.penalty);
    lb.upload(logits);
    step.upload(std::vector<uint32_t>{c.token, c.pos, 0, 1});
    penalty.set(c.penalty);
    inverse.set(1.0f / c.penalty);
    last_n.set(c.last_n);
    g.submit_and_wait();
    const auto got = lb.download<float>();
    for (uint32_t i = 0; i < vocab; ++i)
      ASSERT_EQ(got[i], want[i]) << "token " << i << " at pos " << c.pos << ", window " << c.last_n << ", penalty " << c.penalty;
    EXPECT_EQ(hb.download<uint32_t>(uint64_t{c.pos} * 4, 1)[0], c.token) << "the history at the decoded position";
  }
}

}  // namespace
}  // namespace bdsl::test
