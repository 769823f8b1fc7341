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

json chat_logprobs_json(std::span<const TokenLogprobText> tokens) {
  auto bytes = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(int(c));
    return b;
  };
  json content = json::array();
  for (const auto& t : tokens) {
    json top = json::array();
    for (const auto& [token, logprob] : t.top) top.push_back({{"token", token}, {"logprob", logprob}, {"bytes", bytes(token)}});
    content.push_back({{"token", t.token}, {"logprob", t.logprob.value_or(0.0f)}, {"bytes", bytes(t.token)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

namespace {
// `s` as the answer's JSON will hold it: bytes that are not UTF-8 as U+FFFD (dump()'s rule), so
// that two keys that only the answer would make equal are one key here.
std::string as_sent(const std::string& s) { return json::parse(dump(json(s))).get<std::string>(); }
}  // namespace

json completion_logprobs_json(std::span<const TokenLogprobText> tokens, size_t& offset) {
  json text = json::array(), logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const auto& t : tokens) {
    text.push_back(t.token);
    offsets.push_back(offset);
    offset += t.text_bytes;
    if (!t.logprob) {
      logprobs.push_back(nullptr);
      top.push_back(nullptr);
      continue;
    }
    logprobs.push_back(*t.logprob);
    json alternatives = json::object();
    for (const auto& [token, logprob] : t.top) alternatives.emplace(as_sent(token), logprob);  // the first of equal texts stays
    alternatives.emplace(as_sent(t.token), *t.logprob);
    top.push_back(alternatives);
  }
  return {{"tokens", text}, {"token_logprobs", logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json choice_json(const ResponseHeader& h, uint32_t index, const std::string& text, FinishReason reason,
                 const json& logprobs) {
  json choice = {{"index", index}, {"finish_reason", finish_reason(reason)}, {"logprobs", logprobs}};
  if (h.chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  return choice;
}

json completion_json(const ResponseHeader& h, json choices, const Usage& usage) {
  json j = object_header(h, "chat.completion", "text_completion");
  j["choices"] = std::move(choices);
  j["usage"] = usage_json(usage);
  return j;
}

json chunk_json(const ResponseHeader& h, uint32_t index, const std::string& text, std::optional<FinishReason> reason,
                bool first, const json& logprobs) {
  json j = object_header(h, "chat.completion.chunk", "text_completion");
  json choice = {{"index", index},
                 {"finish_reason", reason ? json(finish_reason(*reason)) : json(nullptr)},
                 {"logprobs", logprobs}};
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
