#include "serve/prompt_scorer.h"

#include <algorithm>
#include <future>
#include <thread>

namespace bdsl::serve {

PromptScorer::PromptScorer(uint32_t top, std::function<void(const models::TokenLogprobs&)> deliver)
    : top_(top), deliver_(std::move(deliver)), batch_(std::max(1u, std::thread::hardware_concurrency())) {}

void PromptScorer::add(std::span<const float> logits, int32_t next) {
  pending_.push_back({std::vector<float>(logits.begin(), logits.end()), next});
  if (pending_.size() >= batch_) flush();
}

void PromptScorer::flush() {
  std::vector<std::future<models::TokenLogprobs>> scored;
  for (const Row& r : pending_)
    scored.push_back(std::async(std::launch::async, [&r, top = top_] { return models::token_logprobs(r.logits, r.next, top); }));
  for (auto& s : scored) deliver_(s.get());  // in order; every future is waited for before pending_ goes
  pending_.clear();
}

}  // namespace bdsl::serve
