#include "serve/openai_response.h"

namespace bdsl::serve {

using nlohmann::json;

namespace {

json object_header(const ResponseHeader& h, const char* chat_object, const char* text_object) {
  return {{"id", h.id}, {"object", h.chat ? chat_object : text_object}, {"created", h.created}, {"model", h.model}};
}

// Only the ends a client sees as finish_reason reach here.
const char* finish_reason(FinishReason r) { return r == FinishReason::Length ? "length" : "stop"; }

}  // namespace

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json completion_json(const ResponseHeader& h, const std::string& text, FinishReason reason, const Usage& usage) {
  json j = object_header(h, "chat.completion", "text_completion");
  json choice = {{"index", 0}, {"finish_reason", finish_reason(reason)}, {"logprobs", nullptr}};
  if (h.chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(usage);
  return j;
}

json chunk_json(const ResponseHeader& h, const std::string& text, std::optional<FinishReason> reason, bool first) {
  json j = object_header(h, "chat.completion.chunk", "text_completion");
  json choice = {{"index", 0},
                 {"finish_reason", reason ? json(finish_reason(*reason)) : json(nullptr)},
                 {"logprobs", nullptr}};
  if (h.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && !reason)) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  j["choices"] = json::array({choice});
  return j;
}

json usage_chunk_json(const ResponseHeader& h, const Usage& usage) {
  json j = object_header(h, "chat.completion.chunk", "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return j;
}

json models_json(const std::string& model, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "bitnet-dsl"}}})}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace bdsl::serve
