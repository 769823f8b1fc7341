// BitNetBatchDecoder's outputs (batch_decoder.h): a submitted step's tokens, argmaxes,
// candidates, logits and log-probabilities, read back from the device once it is done.
#include <fmt/format.h>

#include <stdexcept>

#include "models/bitnet/batch_decoder.h"
#include "models/bitnet/batch_lanes.h"
#include "models/bitnet/token_logprob_row.h"
#include "ops/head.h"

namespace bdsl::bitnet {

void BitNetBatchDecoder::wait_in_flight() {
  for (auto& s : steps_)
    if (s.graph->last_ticket()) s.graph->wait(s.graph->last_ticket());
  for (auto& t : tails_)
    for (auto* graph : {t.graph.get(), t.with_layers.get()})
      if (graph && graph->last_ticket()) graph->wait(graph->last_ticket());
}

std::vector<models::StepOutput> BitNetBatchDecoder::read_candidates(const InFlight& f) {
  wait_in_flight();
  const Lanes& L = *lanes_;
  const uint32_t k = top_k();
  std::vector<models::StepOutput> out(f.batch.size());
  for (size_t i = 0; i < f.batch.size(); ++i) {
    if (!f.has_output(i)) continue;
    const uint64_t row = f.lane_of[i];
    if (k) {
      const auto ids = L.top_indices.download<uint32_t>(row * k * 4, k);
      out[i].top_ids.assign(ids.begin(), ids.end());
      out[i].top_logits = L.top_values.download<float>(row * k * 4, k);
    }
    if (models::draws_over_vocabulary(f.batch[i].sampling) || f.batch[i].logprobs >= 0)
      out[i].logits = L.logits.download<float>(row * L.logits_stride, vocab_size());
  }
  return out;
}

std::vector<models::StepOutput> BitNetBatchDecoder::collect(uint64_t ticket) {
  if (in_flight_.empty() || in_flight_.front().ticket != ticket)
    throw std::logic_error(fmt::format("collect({}): steps are collected in the order submitted", ticket));
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  f.tail->wait(f.tail_ticket);
  f.step->wait(f.step_ticket);  // done already; keeps the recording's own bookkeeping
  // Each source's words, as the tail's last dispatch copied them to the staging half of its parity.
  Lanes& L = *lanes_;
  const std::span<const uint32_t> words = L.out_staging.host_words().subspan(f.parity * L.token_sources.size() / 4);
  auto word = [&](TokenSource source, uint32_t row) { return words[size_t(source) * L.source_words + row]; };
  std::vector<models::StepOutput> out = f.candidates.empty() ? std::vector<models::StepOutput>(f.batch.size()) : std::move(f.candidates);
  for (size_t i = 0; i < f.batch.size(); ++i) {
    if (!f.has_output(i)) {
      out[i].argmax = -1;  // a prompt token with more of its run after it
      continue;
    }
    const uint32_t row = f.lane_of[i];
    const TokenSource source = token_source(f.kind, f.batch[i].sampling);
    out[i].token = int32_t(word(source, row));
    // The argmax: the list's best where the token came from a list, the pruned head's or the full
    // head's for the others (the full head's logits are what the others were drawn from).
    out[i].argmax = source == TokenSource::Listed      ? int32_t(word(TokenSource::ListedBest, row))
                    : source == TokenSource::Pruned    ? out[i].token
                                                       : int32_t(word(TokenSource::FullArgmax, row));
    if (f.batch[i].logprobs >= 0) out[i].logprobs = read_logprobs(f, row, uint32_t(f.batch[i].logprobs), out[i].token);
  }
  return out;
}

models::TokenLogprobs BitNetBatchDecoder::read_logprobs(const InFlight& f, uint32_t row, uint32_t top, int32_t token) const {
  const uint32_t words = ops::token_logprob_words(top_logprobs_);
  const std::span<const uint32_t> half = lanes_->logprob_staging.host_words().subspan(size_t{f.parity} * slots_ * words);
  return token_logprob_row(half.subspan(size_t{row} * words, words), top, token, fmt::format("output row {}", row));
}

}  // namespace bdsl::bitnet
