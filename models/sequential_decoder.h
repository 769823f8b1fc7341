// A BatchDecoder of one slot over any DecoderModel: the server's path for a model that has no
// batched step (each "batch" is one sequence's step). What it computes is what the model's
// step() and prefill() compute.
#pragma once
#include <stdexcept>
#include <string>

#include "models/batch_decoder.h"

namespace bdsl::models {

class SequentialDecoder final : public BatchDecoder {
 public:
  SequentialDecoder(DecoderModel& model, uint32_t max_prefill_chunk, uint64_t device_bytes)
      : model_(model), chunk_(max_prefill_chunk), bytes_(device_bytes) {}

  uint32_t slots() const override { return 1; }
  uint32_t context_length() const override { return model_.context_length(); }
  uint32_t vocab_size() const override { return model_.vocab_size(); }
  uint32_t top_k() const override { return model_.top_k(); }
  uint32_t max_prefill_chunk() const override { return chunk_; }
  uint64_t device_bytes() const override { return bytes_; }
  // From the model's logits, on the host.
  bool has_logprobs() const override { return true; }
  uint32_t max_top_logprobs() const override { return kMaxTopLogprobs; }

  StepOutput prefill(uint32_t slot, std::span<const int32_t> tokens, uint32_t pos,
                     const SamplerOptions& sampling = {}, int32_t logprobs = -1, const PromptScoring& scoring = {}) override {
    check_slot(slot);
    StepOutput out = scoring.on_scored ? model_.prefill_scored(tokens, pos, scoring) : model_.prefill(tokens, pos);
    out.token = choose_after_step(model_, out, sampling, pos + uint32_t(tokens.size()));
    logprobs_after_step(model_, out, logprobs);
    return out;
  }
  std::vector<StepOutput> decode(std::span<const Entry> batch) override {
    if (batch.size() != 1) throw std::invalid_argument("a sequential decoder steps one sequence, got " +
                                                       std::to_string(batch.size()));
    check_slot(batch[0].slot);
    if (batch[0].previous >= 0) throw std::invalid_argument("decode() takes tokens, not outputs of the step before (submit() does)");
    StepOutput out = model_.step(batch[0].token, batch[0].pos);
    out.token = choose_after_step(model_, out, batch[0].sampling, batch[0].pos + 1);
    logprobs_after_step(model_, out, batch[0].logprobs);
    return {out};
  }

 private:
  static void check_slot(uint32_t slot) {
    if (slot != 0) throw std::out_of_range("slot " + std::to_string(slot) + " of a one-slot decoder");
  }
  DecoderModel& model_;
  uint32_t chunk_;
  uint64_t bytes_;
};

}  // namespace bdsl::models
