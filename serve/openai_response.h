// The JSON the OpenAI endpoints answer with: whole completions, streamed chunks, the model list.
// Generated text can hold bytes that are not UTF-8 (a random or small model may emit any byte
// token): dump() writes them as U+FFFD so every answer stays valid JSON.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "serve/request.h"

namespace bdsl::serve {

// What every object of one response shares.
struct ResponseHeader {
  bool chat = false;
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;  // unix seconds
  std::string model;
};

// A token's log-probabilities as an answer lists them: its text (the bytes it stands for) and
// its alternatives', most likely first. No logprob: a prompt's first token (nothing before it to
// score it), listed with null. text_bytes: what it adds to the answer's text (0 for a control
// token such as BOS, whose `token` is its name).
struct TokenLogprobText {
  std::string token;
  std::optional<float> logprob;
  std::vector<std::pair<std::string, float>> top;
  size_t text_bytes = 0;
};
// Chat's choice.logprobs: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob,
// bytes}]}], "refusal": null}.
nlohmann::json chat_logprobs_json(std::span<const TokenLogprobText> tokens);
// The completions' choice.logprobs: {tokens, token_logprobs, top_logprobs: one {token: logprob}
// object per token holding the alternatives and the chosen token (as OpenAI's does; null where the
// token has no logprob), text_offset: each token's byte offset in the answer's text, counted from
// `offset` (the text's bytes before these tokens), which is moved past them}.
nlohmann::json completion_logprobs_json(std::span<const TokenLogprobText> tokens, size_t& offset);

// One choice of a whole answer; `logprobs`: the choice's (null where none were asked).
nlohmann::json choice_json(const ResponseHeader& h, uint32_t index, const std::string& text, FinishReason reason,
                           const nlohmann::json& logprobs = nullptr);
// The whole answer: its choices (choice_json's, by index) and the usage.
nlohmann::json completion_json(const ResponseHeader& h, nlohmann::json choices, const Usage& usage);
// A streamed chunk of choice `index`: `text` as the delta, `reason` on its last one; a chat
// choice's first chunk carries the role (as OpenAI's do); `logprobs`, those of the tokens taken
// since the choice's chunk before.
nlohmann::json chunk_json(const ResponseHeader& h, uint32_t index, const std::string& text,
                          std::optional<FinishReason> reason, bool first = false, const nlohmann::json& logprobs = nullptr);
// The chunk after the last one when stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ResponseHeader& h, const Usage& usage);
nlohmann::json usage_json(const Usage& usage);
nlohmann::json models_json(const std::string& model, int64_t created);

std::string dump(const nlohmann::json& j);
// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace bdsl::serve
