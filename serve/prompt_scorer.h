// Scores a prompt's tokens from the logits of the positions before them, on the host's cores: each
// row's log-softmax of the token after it (models::token_logprobs, ~0.6 ms a row of a 128K
// vocabulary on one core). Rows are taken in batches of one per hardware thread and delivered in
// order, so scoring a long prompt costs the scheduler's turn a fraction of that time.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "models/logprobs.h"

namespace bdsl::serve {

class PromptScorer {
 public:
  // `top`: alternatives each token lists; `deliver` gets each token's, in the order added.
  PromptScorer(uint32_t top, std::function<void(const models::TokenLogprobs&)> deliver);
  // The logits of one position (copied) and the token that follows it.
  void add(std::span<const float> logits, int32_t next);
  void flush();  // scores and delivers what is pending

 private:
  struct Row {
    std::vector<float> logits;
    int32_t next;
  };
  uint32_t top_;
  std::function<void(const models::TokenLogprobs&)> deliver_;
  size_t batch_;
  std::vector<Row> pending_;
};

}  // namespace bdsl::serve
