// The host sampler, the twin of the device's (ops/head/sample_candidates.h): Philox against the
// published answers, greedy, each filter's cut, seeded reproducibility, and that the draws follow
// softmax(logit / temperature) over what the filters keep.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

#include "models/sampler.h"

namespace bdsl::models {
namespace {

// Candidates most likely first: logit of id i is -i * step.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<float> logits;
};
Candidates falling(int n, float step) {
  Candidates c;
  for (int i = 0; i < n; ++i) c.ids.push_back(i), c.logits.push_back(-float(i) * step);
  return c;
}

// How often each id is drawn at positions 0..draws-1.
std::map<int32_t, int> counts(const SamplerOptions& o, const Candidates& c, int draws = 4000) {
  const Sampler s(o);
  std::map<int32_t, int> seen;
  for (int i = 0; i < draws; ++i) ++seen[s.sample(c.ids, c.logits, uint32_t(i))];
  return seen;
}
std::set<int32_t> drawn(const SamplerOptions& o, const Candidates& c) {
  std::set<int32_t> ids;
  for (const auto& [id, n] : counts(o, c)) ids.insert(id);
  return ids;
}

// llama.cpp's repeat penalty: each distinct token of the window once, a positive logit divided (as
// a product with 1 / penalty), the others multiplied; ids outside the logits ignored.
TEST(Sampler, RepeatPenaltyTouchesEachTokenOfTheWindowOnce) {
  std::vector<float> logits = {2.0f, -1.0f, 0.0f, 3.0f, 1.5f};
  const std::vector<int32_t> window = {0, 1, 0, 2, 0, 7, -1};
  apply_repeat_penalty(logits, window, 2.0f);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -2.0f, 0.0f, 3.0f, 1.5f}));
  std::vector<float> one = {0.3f};
  apply_repeat_penalty(one, std::vector<int32_t>{0}, 1.3f);
  EXPECT_EQ(one[0], 0.3f * (1.0f / 1.3f));
  EXPECT_TRUE(penalizes({0.0f, 40, 1.0f, 0.0f, 0, 1.1f, 64}));
  EXPECT_FALSE(penalizes({0.0f, 40, 1.0f, 0.0f, 0, 1.1f, 0}));
  EXPECT_FALSE(penalizes({0.0f, 40, 1.0f, 0.0f, 0, 1.0f, 64}));
  EXPECT_THROW(Sampler({0.0f, 40, 1.0f, 0.0f, 0, 0.0f, 64}), std::invalid_argument);
  EXPECT_THROW(Sampler({0.0f, 40, 1.0f, 0.0f, 0, 1.1f, kMaxRepeatLastN + 1}), std::invalid_argument);
}

TEST(Sampler, PhiloxGivesThePublishedAnswers) {
  // Random123's known-answer vectors for philox4x32_10.
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, 0), (std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffffffffffffull),
            (std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0x299f31d0a4093822ull),
            (std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Sampler, TemperatureZeroTakesTheFirstCandidate) {
  EXPECT_EQ(drawn({0.0f, 0, 1.0f, 0.0f, 7}, falling(8, 0.1f)), std::set<int32_t>{0});
}

TEST(Sampler, EachPositionDrawsAfreshAndTheSeedRepeatsIt) {
  const auto c = falling(32, 0.05f);
  const Sampler a({1.0f, 0, 1.0f, 0.0f, 42}), b({1.0f, 0, 1.0f, 0.0f, 42}), other({1.0f, 0, 1.0f, 0.0f, 43});
  int same_as_other = 0;
  std::set<int32_t> seen;
  for (uint32_t pos = 0; pos < 200; ++pos) {
    EXPECT_EQ(a.sample(c.ids, c.logits, pos), b.sample(c.ids, c.logits, pos)) << "position " << pos;
    EXPECT_EQ(a.sample(c.ids, c.logits, pos), a.sample(c.ids, c.logits, pos)) << "no hidden state";
    same_as_other += a.sample(c.ids, c.logits, pos) == other.sample(c.ids, c.logits, pos);
    seen.insert(a.sample(c.ids, c.logits, pos));
  }
  EXPECT_LT(same_as_other, 40) << "another seed draws other tokens";
  EXPECT_GT(seen.size(), 16u) << "positions draw afresh";
}

TEST(Sampler, DrawsFollowTheSoftmaxAtTheTemperature) {
  Candidates c{{7, 3, 9, 1}, {2.0f, 1.5f, 1.0f, 0.0f}};
  for (float t : {1.0f, 0.5f, 2.0f}) {
    const int draws = 20000;
    const auto seen = counts({t, 0, 1.0f, 0.0f, 5}, c, draws);
    double z = 0;
    for (float l : c.logits) z += std::exp(l / t);
    for (size_t i = 0; i < c.ids.size(); ++i) {
      const double expected = std::exp(c.logits[i] / t) / z;
      const double got = seen.count(c.ids[i]) ? seen.at(c.ids[i]) / double(draws) : 0.0;
      EXPECT_NEAR(got, expected, 0.012) << "id " << c.ids[i] << " at temperature " << t;
    }
  }
}

TEST(Sampler, TopKCutsTheCandidates) {
  EXPECT_EQ(drawn({10.0f, 3, 1.0f, 0.0f, 1}, falling(16, 0.01f)), (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(drawn({10.0f, 0, 1.0f, 0.0f, 1}, falling(16, 0.01f)).size(), 16u) << "top-k 0: no cut";
}

TEST(Sampler, TopPKeepsTheSmallestPrefixWithTheMass) {
  // Weights 1, 1/2, 1/4, 1/8, ... of 2 in all: the first two hold 75%, three 87.5%.
  const auto c = falling(12, std::log(2.0f));
  EXPECT_EQ(drawn({1.0f, 0, 0.75f, 0.0f, 2}, c), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(drawn({1.0f, 0, 0.8f, 0.0f, 2}, c), (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(drawn({1.0f, 0, 0.1f, 0.0f, 2}, c), std::set<int32_t>{0});
  // The mass is over what top-k kept: of 1 + 1/2, the first holds 67%.
  EXPECT_EQ(drawn({1.0f, 2, 0.6f, 0.0f, 2}, c), std::set<int32_t>{0});
  EXPECT_EQ(drawn({1.0f, 2, 0.7f, 0.0f, 2}, c), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, MinPKeepsOnlyCandidatesNearTheBest) {
  // p_i / p_0 = exp(-i): min_p 0.1 keeps i <= ln 10 = 2.30, so ids 0, 1, 2.
  const auto c = falling(16, 1.0f);
  EXPECT_EQ(drawn({1.0f, 0, 1.0f, 0.1f, 3}, c), (std::set<int32_t>{0, 1, 2}));
  // The floor is on the logits before the temperature: a hot sampler keeps the same three.
  EXPECT_EQ(drawn({5.0f, 0, 1.0f, 0.1f, 3}, c), (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(drawn({1.0f, 0, 1.0f, 1.0f, 3}, c), std::set<int32_t>{0}) << "min_p 1 is greedy";
}

TEST(Sampler, MinPZeroChangesNothing) {
  // With every candidate far above the floor, a tiny min_p draws exactly what min_p 0 does.
  const auto c = falling(32, 0.2f);
  const Sampler tiny({0.9f, 20, 0.9f, 1e-30f, 11}), zero({0.9f, 20, 0.9f, 0.0f, 11});
  for (uint32_t i = 0; i < 200; ++i) EXPECT_EQ(tiny.sample(c.ids, c.logits, i), zero.sample(c.ids, c.logits, i));
}

// The draw over the whole vocabulary (top_k 0): top-p keeps the smallest set of most likely
// tokens whose probability reaches top_p, every token tied at the boundary included, and the
// draws follow softmax(logit / temperature) over what it keeps. Token i's logit at logits[i].
TEST(SamplerVocabulary, TopPKeepsTheSmallestSetReachingTheMassAndDrawsBySoftmax) {
  // Probabilities in proportion to 8, 4, 2, 1, 1, 0.5 (total 16.5) in a scrambled order.
  const std::vector<float> logits = {std::log(1.0f), std::log(8.0f), std::log(0.5f), std::log(2.0f), std::log(4.0f), std::log(1.0f)};
  auto count = [&](const SamplerOptions& o, int draws) {
    const Sampler s(o);
    std::map<int32_t, int> seen;
    for (int i = 0; i < draws; ++i) ++seen[s.sample_vocabulary(logits, uint32_t(i))];
    return seen;
  };
  auto ids = [](const std::map<int32_t, int>& seen) {
    std::set<int32_t> out;
    for (const auto& [id, n] : seen) out.insert(id);
    return out;
  };
  // 8/16.5 = 0.485: top_p 0.48 keeps id 1 alone; 0.49 needs id 4 too (12/16.5 = 0.727).
  EXPECT_EQ(ids(count({1.0f, 0, 0.48f, 0.0f, 5}, 500)), std::set<int32_t>{1});
  EXPECT_EQ(ids(count({1.0f, 0, 0.49f, 0.0f, 5}, 500)), (std::set<int32_t>{1, 4}));
  // 14/16.5 = 0.848 with id 3; past it the two tied at 1 (ids 0 and 5) come in together.
  EXPECT_EQ(ids(count({1.0f, 0, 0.85f, 0.0f, 5}, 2000)), (std::set<int32_t>{0, 1, 3, 4, 5}));
  EXPECT_EQ(ids(count({1.0f, 0, 1.0f, 0.0f, 5}, 4000)).size(), 6u) << "top_p 1 keeps every token";
  // min_p 0.2 keeps tokens at least 0.2 times as likely as the best (8 -> 1.6): ids 1, 4, 3.
  EXPECT_EQ(ids(count({1.0f, 0, 1.0f, 0.2f, 5}, 2000)), (std::set<int32_t>{1, 3, 4}));
  // Frequencies at temperature 0.5 over the nucleus {1, 4, 3}: p^2 in proportion, 64 : 16 : 4.
  const int draws = 40000;
  const auto seen = count({0.5f, 0, 0.8f, 0.0f, 9}, draws);
  const std::map<int32_t, double> want = {{1, 64.0 / 84}, {4, 16.0 / 84}, {3, 4.0 / 84}};
  ASSERT_EQ(ids(seen), (std::set<int32_t>{1, 3, 4}));
  for (const auto& [id, p] : want) {
    const double sigma = std::sqrt(p * (1 - p) / draws);
    EXPECT_NEAR(double(seen.at(id)) / draws, p, 5 * sigma) << "id " << id;
  }
  EXPECT_EQ(Sampler({0.0f, 0, 0.5f, 0.0f, 1}).sample_vocabulary(logits, 3), 1) << "greedy: the argmax";
}

TEST(Sampler, RejectsSettingsOutOfRange) {
  EXPECT_THROW(Sampler({1.0f, 0, 1.0f, -0.1f, 0}), std::invalid_argument);
  EXPECT_THROW(Sampler({1.0f, 0, 1.0f, 1.5f, 0}), std::invalid_argument);
  EXPECT_THROW(Sampler({1.0f, 0, 1.0f, std::nanf(""), 0}), std::invalid_argument);
  EXPECT_THROW(Sampler({-1.0f, 0, 1.0f, 0.0f, 0}), std::invalid_argument);
  EXPECT_THROW(Sampler({1.0f, 0, 0.0f, 0.0f, 0}), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::models
