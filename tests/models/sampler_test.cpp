// The host sampler: greedy, seeded reproducibility, and min-p (which keeps only candidates at
// least min_p times as likely as the best, on the logits before the temperature).
#include <gtest/gtest.h>

#include <cmath>
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

std::set<int32_t> drawn(const SamplerOptions& o, const Candidates& c, int draws = 2000) {
  Sampler s(o);
  std::set<int32_t> seen;
  for (int i = 0; i < draws; ++i) seen.insert(s.sample(c.ids, c.logits));
  return seen;
}

TEST(Sampler, TemperatureZeroTakesTheFirstCandidate) {
  const auto c = falling(8, 0.1f);
  EXPECT_EQ(drawn({0.0f, 0, 1.0f, 0.0f, 7}, c), std::set<int32_t>{0});
}

TEST(Sampler, SameSeedSameSequence) {
  const auto c = falling(32, 0.05f);
  Sampler a({1.0f, 0, 1.0f, 0.0f, 42}), b({1.0f, 0, 1.0f, 0.0f, 42});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.sample(c.ids, c.logits), b.sample(c.ids, c.logits)) << "draw " << i;
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
  // These draws are what the sampler gave before min-p existed (same options, seed 11).
  const auto c = falling(32, 0.2f);
  const std::vector<int32_t> before_min_p = {1, 1, 3, 2, 0, 3, 0, 5, 1, 8, 0, 1, 7, 9, 8, 1};
  SamplerOptions defaults;
  EXPECT_EQ(defaults.min_p, 0.0f);
  Sampler off({0.9f, 20, 0.9f, 0.0f, 11});
  for (size_t i = 0; i < before_min_p.size(); ++i) EXPECT_EQ(off.sample(c.ids, c.logits), before_min_p[i]) << "draw " << i;
  // With every candidate far above the floor, a tiny min_p draws exactly what min_p 0 does.
  Sampler tiny({0.9f, 20, 0.9f, 1e-30f, 11}), zero({0.9f, 20, 0.9f, 0.0f, 11});
  for (int i = 0; i < 200; ++i) EXPECT_EQ(tiny.sample(c.ids, c.logits), zero.sample(c.ids, c.logits));
}

TEST(Sampler, RejectsMinPOutsideZeroToOne) {
  EXPECT_THROW(Sampler({1.0f, 0, 1.0f, -0.1f, 0}), std::invalid_argument);
  EXPECT_THROW(Sampler({1.0f, 0, 1.0f, 1.5f, 0}), std::invalid_argument);
  EXPECT_THROW(Sampler({1.0f, 0, 1.0f, std::nanf(""), 0}), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::models
