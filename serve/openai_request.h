// The bodies of POST /v1/chat/completions and POST /v1/completions, parsed and checked. Every
// problem is an ApiError naming the field (OpenAI's error shape); fields a client may send that
// do not change generation here (user, logit_bias, ...) are ignored.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/sampler.h"
#include "models/tokenizer/chat_template.h"

namespace bdsl::serve {

// What the server knows when it checks a request.
struct ServedModel {
  std::string name;             // the id clients pass as "model"
  uint32_t context_length = 0;  // tokens of prompt and completion together
  uint32_t candidates = 0;      // top-k candidates each step returns for sampling (<= 128)
  int32_t max_top_logprobs = -1;  // alternatives a token's log-probabilities may list; -1: none given
};

// A completion's prompt: text, or token ids (OpenAI's array form).
struct CompletionPrompt {
  std::string text;
  std::vector<int32_t> tokens;  // when given as ids, else empty
};

inline constexpr uint32_t kMaxChoicesPerPrompt = 128;  // n, as OpenAI's limit
inline constexpr size_t kMaxPrompts = 2048;            // prompts in one completions request, as OpenAI's

struct CompletionParams {
  bool chat = false;
  std::vector<models::ChatMessage> messages;  // chat
  std::vector<CompletionPrompt> prompts;      // completions: one or more (each gets n choices)
  bool echo = false;                          // completion: the prompt is returned before the completion
  uint32_t n = 1;                             // choices per prompt, each drawn with its own seed
  models::SamplerOptions sampling;
  uint32_t max_tokens = 0;                    // 0: until the context is full
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;                 // stream_options.include_usage
  // >= 0: each token's log-probability and this many alternatives' (chat's top_logprobs, the
  // completions' logprobs); -1: none.
  int32_t logprobs = -1;
};

// A request body that must be a JSON object (OpenAI-shaped 400s for anything else: not JSON, not
// UTF-8, not an object).
nlohmann::json parse_json_object(std::string_view body);
// A true/false field of `body`; `fallback` where it is absent or null, a 400 naming it where it is
// something else.
bool boolean(const nlohmann::json& body, const char* key, bool fallback = false);

CompletionParams parse_chat_request(std::string_view body, const ServedModel& model);
CompletionParams parse_completion_request(std::string_view body, const ServedModel& model);

}  // namespace bdsl::serve
