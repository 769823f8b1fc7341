#include "models/perplexity.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "models/numerics/logit_stats.h"

namespace bdsl::models {

uint32_t perplexity_windows(size_t tokens, uint32_t context) { return context ? uint32_t(tokens / context) : 0; }
uint32_t scored_per_window(uint32_t context) { return context - 1 - context / 2; }

std::vector<int32_t> perplexity_tokens(std::span<const int32_t> tokens, uint32_t context, int32_t bos) {
  const uint32_t windows = perplexity_windows(tokens.size(), context);
  std::vector<int32_t> out(tokens.begin(), tokens.begin() + int64_t(uint64_t{windows} * context));
  if (bos >= 0)
    for (uint32_t w = 0; w < windows; ++w) out[size_t(w) * context] = bos;
  return out;
}

void check_perplexity_inputs(std::span<const int32_t> tokens, uint32_t context, int32_t bos, uint32_t model_context,
                             uint32_t vocab, const KlBaseReader* base) {
  if (context < 2) throw std::invalid_argument("a perplexity window needs at least 2 tokens, got " + std::to_string(context));
  if (context > model_context)
    throw std::invalid_argument("a window of " + std::to_string(context) + " tokens does not fit the model's context of " +
                                std::to_string(model_context) + " (lower --ctx)");
  const uint32_t windows = perplexity_windows(tokens.size(), context);
  if (windows == 0)
    throw std::invalid_argument("the text is " + std::to_string(tokens.size()) + " tokens; one window of --ctx " +
                                std::to_string(context) + " needs at least " + std::to_string(context) +
                                " (a longer text or a smaller --ctx)");
  if (!base) return;
  const KlBaseHeader& h = base->header();
  if (h.vocab != vocab)
    throw std::invalid_argument("the KL-divergence base holds logits over a vocabulary of " + std::to_string(h.vocab) +
                                " tokens; this model's has " + std::to_string(vocab) + " (a base of another model family)");
  if (h.context != context)
    throw std::invalid_argument("the KL-divergence base was written with --ctx " + std::to_string(h.context) +
                                "; this run has --ctx " + std::to_string(context));
  if (h.scored != scored_per_window(context))
    throw std::invalid_argument("the KL-divergence base scores " + std::to_string(h.scored) + " positions a window; a window of " +
                                std::to_string(context) + " scores " + std::to_string(scored_per_window(context)) +
                                " (a base written otherwise)");
  if (h.windows != windows)
    throw std::invalid_argument("the KL-divergence base holds " + std::to_string(h.windows) + " windows; this text gives " +
                                std::to_string(windows) + " (another text or tokenizer)");
  const auto evaluated = perplexity_tokens(tokens, context, bos);
  const auto mismatch = std::mismatch(evaluated.begin(), evaluated.end(), base->tokens().begin());
  if (mismatch.first != evaluated.end())
    throw std::invalid_argument("the KL-divergence base's tokens differ from this text's at token " +
                                std::to_string(mismatch.first - evaluated.begin()) + " (another text or tokenizer)");
}

KlBaseWriter open_kl_base(const std::string& path, std::span<const int32_t> tokens, uint32_t context, int32_t bos,
                          uint32_t vocab) {
  const uint32_t windows = perplexity_windows(tokens.size(), context);
  return KlBaseWriter(path, {vocab, context, windows, scored_per_window(context)}, perplexity_tokens(tokens, context, bos));
}

PerplexityResult evaluate_perplexity(DecoderModel& model, std::span<const int32_t> tokens, const PerplexityOptions& o) {
  check_perplexity_inputs(tokens, o.context, o.bos, model.context_length(), model.vocab_size(), o.compare);
  const uint32_t windows = perplexity_windows(tokens.size(), o.context);
  const auto evaluated = perplexity_tokens(tokens, o.context, o.bos);
  const uint32_t first = o.context / 2;
  PerplexityResult r;
  r.windows = windows;
  double nll = 0, nll2 = 0;
  for (uint32_t w = 0; w < windows; ++w) {
    const std::span<const int32_t> window(evaluated.data() + size_t(w) * o.context, o.context);
    model.prefill_all_logits(window, 0, [&](uint32_t i, std::span<const float> logits) {
      if (i < first || i + 1 >= o.context) return;
      const double v = numerics::negative_log_likelihood(logits, uint32_t(window[i + 1]));
      nll += v;
      nll2 += v * v;
      ++r.scored;
      if (o.save) o.save->write_row(logits);
      if (o.compare) {
        const auto base = o.compare->next_row();
        r.kl.push_back(numerics::kl_divergence_from_log_probs(base, logits));
        r.top1_same += numerics::top_index(base) == numerics::top_index(logits);
      }
    });
    r.running_ppl.push_back(std::exp(nll / r.scored));
    if (o.progress) o.progress(w + 1, windows);
  }
  const double mean = nll / r.scored;
  r.ppl = std::exp(mean);
  const double var = std::max(nll2 / r.scored - mean * mean, 0.0);
  r.ppl_error = r.scored > 1 ? r.ppl * std::sqrt(var / (r.scored - 1)) : 0.0;
  return r;
}

KlSummary summarize_kl(const PerplexityResult& r) {
  KlSummary s;
  if (r.kl.empty()) return s;
  std::vector<double> v = r.kl;
  std::sort(v.begin(), v.end());
  const double n = double(v.size());
  double sum = 0, sum2 = 0;
  for (double x : v) sum += x, sum2 += x * x;
  s.mean = sum / n;
  s.mean_error = v.size() > 1 ? std::sqrt(std::max(sum2 / n - s.mean * s.mean, 0.0) / (n - 1)) : 0.0;
  auto at = [&](double q) { return v[std::min(v.size() - 1, size_t(q * (n - 1) + 0.5))]; };
  s.max = v.back(), s.min = v.front();
  s.p99_9 = at(0.999), s.p99 = at(0.99), s.p95 = at(0.95), s.p90 = at(0.90), s.median = at(0.5);
  s.p10 = at(0.10), s.p5 = at(0.05), s.p1 = at(0.01);
  s.top1 = double(r.top1_same) / n;
  return s;
}

}  // namespace bdsl::models
