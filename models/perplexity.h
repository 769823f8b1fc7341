// Perplexity over a text as llama-perplexity computes it, on any DecoderModel: the tokens cut
// into non-overlapping windows of `context` tokens, each window's first token replaced by BOS,
// every window run as one batch (prefill_all_logits), and each token of the window's second
// half scored by the logits of the position before it. PPL = exp(mean NLL), its error
// exp(mean) * sqrt(var(NLL) / (n - 1)). With a base file (models/kl_base_file.h) the same
// positions' distributions are compared with the base's: KL(base || model) and top-1 agreement.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/decoder_model.h"
#include "models/kl_base_file.h"

namespace bdsl::models {

struct PerplexityOptions {
  uint32_t context = 512;  // tokens a window
  int32_t bos = -1;        // the first token of every window (-1: the text's own)
  KlBaseWriter* save = nullptr;    // writes every scored position's log-probabilities
  KlBaseReader* compare = nullptr;  // compares every scored position with the base's
  std::function<void(uint32_t windows_done, uint32_t windows)> progress;
};

struct PerplexityResult {
  uint32_t windows = 0, scored = 0;  // scored tokens in all
  double ppl = 0, ppl_error = 0;
  std::vector<double> running_ppl;  // after each window
  // With compare: per scored token, in order.
  std::vector<double> kl;
  uint32_t top1_same = 0;
};

// The windows the tokens give (tokens / context) and the tokens scored in each (the second half
// but the last: context - 1 - context / 2).
uint32_t perplexity_windows(size_t tokens, uint32_t context);
uint32_t scored_per_window(uint32_t context);
// The windows as evaluated: the first windows * context tokens, each window's first set to bos.
std::vector<int32_t> perplexity_tokens(std::span<const int32_t> tokens, uint32_t context, int32_t bos);

// What evaluate_perplexity checks first, before a model is loaded: std::invalid_argument when the
// text has no whole window, the context does not fit the model, or the base to compare with is
// for another vocabulary, context or text (each named).
void check_perplexity_inputs(std::span<const int32_t> tokens, uint32_t context, int32_t bos, uint32_t model_context,
                             uint32_t vocab, const KlBaseReader* base);
PerplexityResult evaluate_perplexity(DecoderModel& model, std::span<const int32_t> tokens, const PerplexityOptions& options);
// A base file for these tokens and windows (the writer's header from them).
KlBaseWriter open_kl_base(const std::string& path, std::span<const int32_t> tokens, uint32_t context, int32_t bos,
                          uint32_t vocab);

struct KlSummary {
  double mean = 0, mean_error = 0, max = 0, min = 0;
  double p99_9 = 0, p99 = 0, p95 = 0, p90 = 0, median = 0, p10 = 0, p5 = 0, p1 = 0;
  double top1 = 0;  // fraction of positions whose top token is the base's
};
KlSummary summarize_kl(const PerplexityResult& r);

}  // namespace bdsl::models
