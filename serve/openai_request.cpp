#include "serve/openai_request.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <random>
#include <string>

#include "serve/api_error.h"

namespace bdsl::serve {
namespace {

using nlohmann::json;

constexpr size_t kMaxStopStrings = 4;  // as OpenAI
constexpr uint32_t kMaxTopK = 128;     // the most candidates a step returns

// The field, or nullptr when absent or null (OpenAI treats null as "not given").
const json* field(const json& body, const char* key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number_in(const json& body, const char* key, double lo, double hi, double fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_number()) throw bad_field(key, std::string("'") + key + "' must be a number", "invalid_type");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw bad_field(key, std::string("'") + key + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                             ", got " + v->dump());
  return x;
}

int64_t integer_in(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_number_integer()) throw bad_field(key, std::string("'") + key + "' must be an integer", "invalid_type");
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
    throw bad_field(key, std::string("'") + key + "' is too large: " + v->dump());
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw bad_field(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " +
                             std::to_string(hi) + ", got " + std::to_string(x));
  return x;
}


void check_model(const json& body, const ServedModel& model) {
  const json* v = field(body, "model");
  if (!v) return;  // one model is served: no name needed
  if (!v->is_string()) throw bad_field("model", "'model' must be a string", "invalid_type");
  if (v->get<std::string>() != model.name)
    throw model_not_found(v->get<std::string>(), model.name);
}

std::vector<std::string> stop_strings(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw bad_field("stop", "'stop' must be a string or an array of strings", "invalid_type");
  if (v->size() > kMaxStopStrings)
    throw bad_field("stop", "'stop' takes at most " + std::to_string(kMaxStopStrings) + " strings");
  std::vector<std::string> out;
  for (const auto& s : *v) {
    if (!s.is_string()) throw bad_field("stop", "every element of 'stop' must be a string", "invalid_type");
    out.push_back(s.get<std::string>());
  }
  return out;
}

// Everything but the prompt: sampling, limits, streaming.
// OpenAI fields this server does not implement: refused by name when they ask for something, never
// silently ignored (0, null, false, an empty object or array, "none", plain text: nothing asked,
// accepted). Penalties and logit bias; for chat, tools and functions, a response format other
// than text, audio; for completions, a suffix, best_of, and echo in a stream.
void refuse_unsupported(const json& body, bool chat) {
  auto refuse = [](const char* key, const char* what) {
    throw bad_field(key, std::string("'") + key + "'" + (*what ? std::string(" ") + what : "") + " is not supported by this server",
                    "unsupported_value");
  };
  for (const char* key : {"frequency_penalty", "presence_penalty"})
    if (number_in(body, key, -2, 2, 0) != 0) refuse(key, "other than 0");
  if (const json* bias = field(body, "logit_bias")) {
    if (!bias->is_object()) throw bad_field("logit_bias", "'logit_bias' must be an object", "invalid_type");
    if (!bias->empty()) refuse("logit_bias", "");
  }
  // A non-empty array (tools and the legacy functions: the model would be asked to call them).
  auto refuse_list = [&](const char* key) {
    if (const json* v = field(body, key)) {
      if (!v->is_array()) throw bad_field(key, std::string("'") + key + "' must be an array", "invalid_type");
      if (!v->empty()) refuse(key, "");
    }
  };
  // A choice other than none or auto (strings) asks for something.
  auto refuse_choice = [&](const char* key) {
    if (const json* v = field(body, key))
      if (!v->is_string() || (*v != "none" && *v != "auto")) refuse(key, "other than 'none' or 'auto'");
  };
  if (chat) {
    refuse_list("tools");
    refuse_list("functions");
    refuse_choice("tool_choice");
    refuse_choice("function_call");
    if (const json* f = field(body, "response_format")) {
      if (!f->is_object() || !f->contains("type") || !(*f)["type"].is_string())
        throw bad_field("response_format", "'response_format' must be an object with a string 'type'", "invalid_type");
      if ((*f)["type"].get<std::string>() != "text") refuse("response_format", "other than {\"type\": \"text\"}");
    }
    if (const json* m = field(body, "modalities"))
      if (*m != json::array({"text"})) refuse("modalities", "other than [\"text\"]");
    if (field(body, "audio")) refuse("audio", "");
  } else {
    if (boolean(body, "echo") && boolean(body, "stream")) refuse("echo", "with stream");
    if (const json* v = field(body, "suffix")) {
      if (!v->is_string()) throw bad_field("suffix", "'suffix' must be a string", "invalid_type");
      if (!v->get_ref<const std::string&>().empty()) refuse("suffix", "");
    }
    if (integer_in(body, "best_of", 1, 20, 1) != 1) refuse("best_of", "other than 1");
  }
}

// Log-probabilities: chat's `logprobs` (true or false) with `top_logprobs` alternatives (0 to 20,
// only with logprobs true, as OpenAI requires); the completions' `logprobs`, the alternatives (0 to
// 5; 0 still asks for the chosen tokens'). -1: none asked.
int32_t logprobs_asked(const json& body, const ServedModel& model, bool chat) {
  int32_t asked = -1;
  const char* key = chat ? "top_logprobs" : "logprobs";
  if (chat) {
    const bool on = boolean(body, "logprobs");
    const int64_t top = integer_in(body, "top_logprobs", 0, 20, 0);
    if (field(body, "top_logprobs") && !on)
      throw bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (on) asked = int32_t(top);
  } else if (field(body, "logprobs")) {
    asked = int32_t(integer_in(body, "logprobs", 0, 5, 0));
  }
  if (asked < 0) return -1;
  if (model.max_top_logprobs < 0)
    throw bad_field("logprobs", "this server gives no log-probabilities", "unsupported_value");
  if (asked > model.max_top_logprobs)
    throw bad_field(key, std::string("'") + key + "' may be at most " + std::to_string(model.max_top_logprobs) +
                             " on this server, got " + std::to_string(asked));
  return asked;
}

void parse_common(const json& body, const ServedModel& model, CompletionParams& p, uint32_t default_max_tokens) {
  check_model(body, model);
  p.n = uint32_t(integer_in(body, "n", 1, kMaxChoicesPerPrompt, 1));
  p.stream = boolean(body, "stream");
  if (const json* o = field(body, "stream_options")) {
    if (!o->is_object()) throw bad_field("stream_options", "'stream_options' must be an object", "invalid_type");
    p.include_usage = boolean(*o, "include_usage");
  }
  const char* limit_key = field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  p.max_tokens = uint32_t(integer_in(body, limit_key, 1, model.context_length, default_max_tokens));
  p.sampling.temperature = float(number_in(body, "temperature", 0, 2, 1));
  p.sampling.top_p = float(number_in(body, "top_p", 0, 1, 1));
  if (p.sampling.top_p == 0) p.sampling.temperature = 0, p.sampling.top_p = 1;  // only the best candidate
  p.sampling.top_k = uint32_t(integer_in(body, "top_k", 0, kMaxTopK, 0));
  p.sampling.min_p = float(number_in(body, "min_p", 0, 1, 0));
  if (p.sampling.temperature > 0 && model.candidates == 0)
    throw bad_field("temperature", "this server decodes greedily only: 'temperature' must be 0");
  refuse_unsupported(body, p.chat);
  p.logprobs = logprobs_asked(body, model, p.chat);
  if (field(body, "seed")) p.sampling.seed = uint64_t(integer_in(body, "seed", INT64_MIN, INT64_MAX, 0));
  else p.sampling.seed = std::random_device{}();
  p.stop = stop_strings(body);
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string message_content(const json& content, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_field(where, "'" + where + "' must be a string or an array of text parts", "invalid_type");
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      throw bad_field(where, "'" + where + "' may only hold parts {\"type\": \"text\", \"text\": ...}", "invalid_type");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<models::ChatMessage> chat_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v) throw bad_field("messages", "'messages' is required", "missing_required_parameter");
  if (!v->is_array()) throw bad_field("messages", "'messages' must be an array", "invalid_type");
  if (v->empty()) throw bad_field("messages", "'messages' must hold at least one message", "empty_array");
  std::vector<models::ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_field(where, "'" + where + "' must be an object", "invalid_type");
    if (!m.contains("role") || !m["role"].is_string())
      throw bad_field(where + ".role", "'" + where + ".role' must be a string", "invalid_type");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant")
      throw bad_field(where + ".role", "'" + where + ".role' must be system, user or assistant, got '" + role + "'");
    if (!m.contains("content")) throw bad_field(where + ".content", "'" + where + ".content' is required",
                                                "missing_required_parameter");
    out.push_back({role, message_content(m["content"], i)});
  }
  return out;
}

// One prompt: a string, or token ids (an array of integers). `where`: its name in errors.
CompletionPrompt one_prompt(const json& v, const std::string& where) {
  CompletionPrompt p;
  if (v.is_array()) {
    if (v.empty()) throw bad_field("prompt", "'" + where + "' is empty");
    for (const auto& id : v) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        throw bad_field("prompt", "'" + where + "' as an array must hold token ids (integers from 0)", "invalid_type");
      p.tokens.push_back(int32_t(id.get<int64_t>()));
    }
    return p;
  }
  if (!v.is_string()) throw bad_field("prompt", "'" + where + "' must be a string or an array of token ids", "invalid_type");
  if (v.get_ref<const std::string&>().empty()) throw bad_field("prompt", "'" + where + "' is empty");
  p.text = v.get<std::string>();
  return p;
}

// The prompts: a string, token ids (an array of integers), or an array of either (one or more
// prompts, each answered by its own choices).
void completion_prompts(const json& body, CompletionParams& p) {
  const json* v = field(body, "prompt");
  if (!v) throw bad_field("prompt", "'prompt' is required", "missing_required_parameter");
  const bool many = v->is_array() && !v->empty() && ((*v)[0].is_string() || (*v)[0].is_array());
  if (!many) {
    p.prompts.push_back(one_prompt(*v, "prompt"));
    return;
  }
  if (v->size() > kMaxPrompts)
    throw bad_field("prompt", "'prompt' holds " + std::to_string(v->size()) + " prompts; at most " +
                                  std::to_string(kMaxPrompts) + " are taken");
  const bool strings = (*v)[0].is_string();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    const std::string where = "prompt[" + std::to_string(i) + "]";
    if (e.is_string() != strings || !(e.is_string() || e.is_array()))
      throw bad_field("prompt", "'prompt' as a list must hold only strings or only arrays of token ids; '" + where +
                                    "' is not like 'prompt[0]'", "invalid_type");
    p.prompts.push_back(one_prompt(e, where));
  }
}

}  // namespace

bool boolean(const json& body, const char* key, bool fallback) {
  const json* v = field(body, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw bad_field(key, std::string("'") + key + "' must be true or false", "invalid_type");
  return v->get<bool>();
}

json parse_json_object(std::string_view body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    // nlohmann's lexer checks UTF-8 inside strings: say so plainly, it is a different mistake.
    if (std::string_view(e.what()).find("UTF-8") != std::string_view::npos)
      throw ApiError(400, "the request body is not valid UTF-8 text", std::nullopt, "invalid_utf8");
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what(), std::nullopt, "invalid_json");
  } catch (const json::exception& e) {  // what parses but cannot be held, such as a number past a double's range
    throw ApiError(400, std::string("the request body cannot be read: ") + e.what(), std::nullopt, "invalid_json");
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object", std::nullopt, "invalid_json");
  return j;
}

CompletionParams parse_chat_request(std::string_view body, const ServedModel& model) {
  const json j = parse_json_object(body);
  CompletionParams p;
  p.chat = true;
  p.messages = chat_messages(j);
  parse_common(j, model, p, 0);
  return p;
}

CompletionParams parse_completion_request(std::string_view body, const ServedModel& model) {
  const json j = parse_json_object(body);
  CompletionParams p;
  completion_prompts(j, p);
  parse_common(j, model, p, 16);  // OpenAI's default for /v1/completions
  p.echo = boolean(j, "echo");
  return p;
}

}  // namespace bdsl::serve
