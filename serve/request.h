// What the scheduler takes and gives back for one generation: token ids in, sampling and stop
// conditions, and the callbacks through which text and the end arrive.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "models/logprobs.h"
#include "models/sampler.h"

namespace bdsl::serve {

// Why a sequence ended, as OpenAI names it ("stop", "length"), plus the ends a client never sees
// as a finish_reason: it went away, the server is shutting down, or the device step failed.
enum class FinishReason { Stop, Length, Cancelled, Shutdown, Error };
const char* to_string(FinishReason r);
// The ends that are an answer (a finish_reason a client sees).
inline bool is_answer(FinishReason r) { return r == FinishReason::Stop || r == FinishReason::Length; }

struct Usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;  // tokens sampled, the end-of-generation token included
};

struct GenerationRequest {
  std::vector<int32_t> prompt;            // token ids, BOS included if the model wants one
  models::SamplerOptions sampling;        // temperature 0: greedy (the step's argmax)
  uint32_t max_tokens = 16;               // >= 1
  std::vector<std::string> stop;          // text that ends generation; not returned itself
  // >= 0: each generated token's log-probability and this many alternatives' go to on_logprobs
  // (the end-of-generation token's excluded); -1: none.
  int32_t logprobs = -1;
  // With logprobs >= 0: on_logprobs first gets the prompt's tokens', from its second token on (each
  // given the tokens before it), then the generated ones'. The prompt then goes through the
  // decoder's prefill (every position's logits), not through decode steps.
  bool prompt_logprobs = false;
  // All are called on the scheduler's thread and must return quickly (queue the text, wake a
  // waiter). on_text gets UTF-8-safe pieces in order; on_logprobs gets a token's log-probabilities
  // before any of its text; on_finish is called exactly once, last.
  std::function<void(std::string_view text)> on_text;
  std::function<void(const models::TokenLogprobs&)> on_logprobs;
  std::function<void(FinishReason, const Usage&)> on_finish;
};

}  // namespace bdsl::serve
