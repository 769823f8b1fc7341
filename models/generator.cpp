#include "models/generator.h"

#include <chrono>
#include <stdexcept>
#include <string>

namespace bdsl::models {

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::Limit: return "token limit";
    case StopReason::EndOfGeneration: return "end of generation";
    case StopReason::ContextFull: return "context full";
    case StopReason::Callback: return "stopped";
  }
  return "?";
}

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

GenerationResult Generator::generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                     const std::function<bool(int32_t)>& on_token) {
  const uint32_t context = model_.context_length();
  if (prompt.empty()) throw std::invalid_argument("empty prompt: nothing to continue");
  if (pos_ + prompt.size() > context)
    throw std::length_error("the prompt (" + std::to_string(prompt.size()) + " tokens after " + std::to_string(pos_) +
                            " in the cache) does not fit the context of " + std::to_string(context) + " tokens");
  GenerationResult result;
  result.prompt_tokens = uint32_t(prompt.size());
  check_sampling(options.sampling, model_.top_k());
  // Every choice is the device's, the first one too: the prompt but its last token fills the
  // cache, and the recording that generates decodes the last (the pruned head: the F16 table's
  // rows are read only where they may win). Where each prompt position's logits or intermediates
  // are wanted, the prompt runs token by token and the host picks the first token.
  const bool penalized = penalizes(options.sampling);
  if (penalized && options.keep_logits)
    throw std::invalid_argument("the repeat penalty runs in the device's sampler: not with every step's logits kept");
  const bool by_token = options.keep_logits || options.after_prompt_token;
  const bool device_first = penalized || !by_token;
  const std::span<const int32_t> prompt_pass = device_first ? prompt.first(prompt.size() - 1) : prompt;
  result.prompt_pass_tokens = uint32_t(prompt_pass.size());

  auto t0 = std::chrono::steady_clock::now();
  StepOutput out;
  if (by_token) {
    for (uint32_t i = 0; i < prompt_pass.size(); ++i) {
      out = model_.step(prompt_pass[i], pos_++);
      if (options.keep_logits) result.logits.push_back(model_.logits());
      if (options.after_prompt_token) options.after_prompt_token(i);
    }
  } else if (!prompt_pass.empty()) {
    model_.fill_cache(prompt_pass, pos_);  // one batch through the matrix-matrix path
    pos_ += uint32_t(prompt_pass.size());
  }
  result.prompt_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  auto pick = [&](StepOutput& o) { return choose_after_step(model_, o, options.sampling, pos_); };
  // Takes a generated token; false when generation ends with it (result.reason says why).
  auto accept = [&](int32_t next) {
    result.tokens.push_back(next);
    if (on_token && !on_token(next)) {
      result.reason = StopReason::Callback;
      return false;
    }
    if (options.is_end && options.is_end(next)) {
      result.reason = StopReason::EndOfGeneration;
      return false;
    }
    if (result.tokens.size() >= options.max_new_tokens) {
      result.reason = StopReason::Limit;
      return false;
    }
    if (pos_ >= context) {
      result.reason = StopReason::ContextFull;
      return false;
    }
    return true;
  };
  if (options.max_new_tokens == 0) {
    result.reason = StopReason::Limit;
    if (device_first) model_.fill_cache(prompt.last(1), pos_++);  // the prompt's last token into the cache, nothing chosen
  } else if (device_first) {
    // Decodes the prompt's last token at pos_ and feeds each choice on; pos_ is each accepted
    // token's position, as below.
    const uint32_t steps = std::min<uint64_t>(options.max_new_tokens, context - pos_);
    model_.decode_sampled(prompt.back(), pos_, steps, options.sampling, [&](int32_t next) {
      ++pos_;
      return accept(next);
    });
  } else if (accept(pick(out))) {
    if (!options.keep_logits) {
      // The device feeds each choice (greedy or drawn) to the next step itself; the host only
      // takes the tokens.
      const uint32_t steps = std::min<uint64_t>(options.max_new_tokens - result.tokens.size(), context - pos_);
      model_.decode_sampled(result.tokens.back(), pos_, steps, options.sampling, [&](int32_t next) {
        ++pos_;
        return accept(next);
      });
    } else {
      do {
        out = model_.step(result.tokens.back(), pos_++);
        if (options.keep_logits) result.logits.push_back(model_.logits());
      } while (accept(pick(out)));
    }
  }
  result.generate_seconds = seconds_since(t0);
  return result;
}

}  // namespace bdsl::models
