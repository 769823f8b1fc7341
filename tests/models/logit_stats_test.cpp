// KL divergence, log-likelihood and top-1 of logits (models/numerics/logit_stats.h) against values
// worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "models/numerics/logit_stats.h"

namespace bdsl::numerics {
namespace {

TEST(LogitStats, LogSoftmaxAndLikelihood) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
  const auto ls = log_softmax(logits);
  EXPECT_NEAR(ls[0], std::log(0.25), 1e-7);
  EXPECT_NEAR(ls[1], std::log(0.75), 1e-7);
  EXPECT_NEAR(negative_log_likelihood(logits, 1), -std::log(0.75), 1e-7);
  // Large logits: no overflow (the max is taken out first).
  EXPECT_NEAR(negative_log_likelihood(std::vector<float>{1000.0f, 1000.0f}, 0), std::log(2.0), 1e-9);
  EXPECT_THROW(negative_log_likelihood(logits, 2), std::out_of_range);
}

TEST(LogitStats, KlDivergence) {
  const std::vector<float> p = {0.0f, std::log(3.0f)}, q = {0.0f, 0.0f};  // (1/4, 3/4) against (1/2, 1/2)
  EXPECT_NEAR(kl_divergence(p, q), 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-7);
  EXPECT_EQ(kl_divergence(p, p), 0.0);
  // A shift of every logit is the same distribution.
  EXPECT_NEAR(kl_divergence(q, std::vector<float>{7.0f, 7.0f}), 0.0, 1e-12);
  EXPECT_THROW(kl_divergence(p, std::vector<float>{1.0f}), std::invalid_argument);
}

TEST(LogitStats, TopIndexTakesTheLowestOnTies) {
  EXPECT_EQ(top_index(std::vector<float>{1.0f, 3.0f, 3.0f, 2.0f}), 1u);
}

}  // namespace
}  // namespace bdsl::numerics

namespace bdsl::numerics {
namespace {

TEST(LogitStats, KlFromStoredLogProbsSkipsImpossibleTokens) {
  const std::vector<float> base = {std::log(0.25f), std::log(0.75f), -INFINITY}, other = {0.0f, 0.0f, 0.0f};
  // (1/4, 3/4, 0) against (1/3, 1/3, 1/3): the third term is 0, not NaN.
  EXPECT_NEAR(kl_divergence_from_log_probs(base, other), 0.25 * std::log(0.75) + 0.75 * std::log(2.25), 1e-6);
}

}  // namespace
}  // namespace bdsl::numerics
