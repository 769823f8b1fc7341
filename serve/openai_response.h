// The JSON the OpenAI endpoints answer with: whole completions, streamed chunks, the model list.
// Generated text can hold bytes that are not UTF-8 (a random or small model may emit any byte
// token): dump() writes them as U+FFFD so every answer stays valid JSON.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "serve/request.h"

namespace bdsl::serve {

// What every object of one response shares.
struct ResponseHeader {
  bool chat = false;
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;  // unix seconds
  std::string model;
};

nlohmann::json completion_json(const ResponseHeader& h, const std::string& text, FinishReason reason,
                               const Usage& usage);
// A streamed chunk: `text` as the delta, `reason` on the last one; the first chat chunk carries
// the role (as OpenAI's do).
nlohmann::json chunk_json(const ResponseHeader& h, const std::string& text, std::optional<FinishReason> reason,
                          bool first = false);
// The chunk after the last one when stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ResponseHeader& h, const Usage& usage);
nlohmann::json usage_json(const Usage& usage);
nlohmann::json models_json(const std::string& model, int64_t created);

std::string dump(const nlohmann::json& j);
// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace bdsl::serve
