#include "models/batch_decoder.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace bdsl::models {

int32_t BatchDecoder::previous_token(const std::vector<StepOutput>& last, int32_t index, size_t entry) {
  if (index < 0 || size_t(index) >= last.size() || last[size_t(index)].argmax < 0)
    throw std::invalid_argument("entry " + std::to_string(entry) + " takes the output of entry " + std::to_string(index) +
                                " of the step before, which " +
                                (index < 0 || size_t(index) >= last.size() ? "has " + std::to_string(last.size()) + " entries"
                                                                           : std::string("has no output")));
  return last[size_t(index)].token;
}

std::vector<StepOutput> BatchDecoder::prefill_shared(std::span<const Sharer> sharers, std::span<const int32_t> tokens,
                                                     uint32_t pos) {
  check_sharers(sharers, slots());
  std::vector<StepOutput> out;
  for (const Sharer& s : sharers) out.push_back(prefill(s.slot, tokens, pos, s.sampling, s.logprobs));
  return out;
}

void BatchDecoder::check_sharers(std::span<const Sharer> sharers, uint32_t slots) {
  if (sharers.empty()) throw std::invalid_argument("prefill_shared: no slot");
  std::vector<bool> seen(slots);
  for (const Sharer& s : sharers) {
    if (s.slot >= slots)
      throw std::out_of_range("prefill_shared: slot " + std::to_string(s.slot) + " of a " + std::to_string(slots) + "-slot decoder");
    if (seen[s.slot]) throw std::invalid_argument("prefill_shared: slot " + std::to_string(s.slot) + " named twice");
    seen[s.slot] = true;
  }
}

uint64_t BatchDecoder::submit(std::span<const Entry> batch) {
  if (done_.size() >= kMaxSubmitted)
    throw std::logic_error("a step submitted while " + std::to_string(done_.size()) + " are not collected");
  std::vector<Entry> resolved(batch.begin(), batch.end());
  for (size_t i = 0; i < resolved.size(); ++i)
    if (resolved[i].previous >= 0) {
      resolved[i].token = previous_token(last_, resolved[i].previous, i);
      resolved[i].previous = -1;
    }
  last_ = decode(resolved);
  done_.emplace_back(++submitted_, last_);
  return submitted_;
}

std::vector<StepOutput> BatchDecoder::collect(uint64_t ticket) {
  if (done_.empty() || done_.front().first != ticket)
    throw std::logic_error("collect(" + std::to_string(ticket) + "): steps are collected in the order submitted");
  std::vector<StepOutput> out = std::move(done_.front().second);
  done_.pop_front();
  return out;
}

}  // namespace bdsl::models
