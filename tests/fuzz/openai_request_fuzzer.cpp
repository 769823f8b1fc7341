// libFuzzer target for the OpenAI request parser (bodies come straight from HTTP clients): the
// input is a request body, parsed as chat and as a completion. Every refusal must be an ApiError
// with a 4xx status (anything else escaping, a crash or a sanitizer report is a failure), and what
// is accepted must be within what the server can run: max_tokens within the context, sampling
// settings in range, at most 20 alternatives' log-probabilities, non-empty prompts (one to 2,048 for a
// completion, none for chat), 1 <= n <= 128. The same body goes to /tokenize and /detokenize
// (a synthetic byte-level vocabulary): a 4xx ApiError, or tokens that detokenize to the content
// (without add_special).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "golden/synthetic_vocab.h"
#include "serve/api_error.h"
#include "serve/openai_request.h"
#include "serve/token_endpoints.h"

namespace {

void check(const bdsl::serve::CompletionParams& p, const bdsl::serve::ServedModel& model) {
  const auto& s = p.sampling;
  const bool ok = p.max_tokens <= model.context_length && s.temperature >= 0 && s.temperature <= 2 && s.top_p >= 0 &&
                  s.top_p <= 1 && s.min_p >= 0 && s.min_p <= 1 && s.top_k <= 128 && p.logprobs >= -1 &&
                  p.logprobs <= model.max_top_logprobs && p.n >= 1 && p.n <= 128 && p.stop.size() <= 4 &&
                  !(p.echo && p.stream) &&
                  (p.chat ? !p.messages.empty() && p.prompts.empty() : !p.prompts.empty() && p.prompts.size() <= 2048);
  for (const auto& prompt : p.prompts)
    if (prompt.text.empty() == prompt.tokens.empty()) std::abort();  // exactly one form, never empty
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const bdsl::serve::ServedModel model{"tiny", 256, 128, 20};
  for (bool chat : {true, false}) {
    try {
      check(chat ? bdsl::serve::parse_chat_request(body, model) : bdsl::serve::parse_completion_request(body, model), model);
    } catch (const bdsl::serve::ApiError& e) {
      if (e.status < 400 || e.status >= 500) std::abort();
    }
  }
  static const bdsl::models::Tokenizer tokenizer(bdsl::golden::make_synthetic_vocab(2048));
  try {
    const auto tokens = bdsl::serve::tokenize_answer(body, tokenizer);
    const auto request = nlohmann::json::parse(body);
    auto asked = [&](const char* key) { return request.contains(key) && request[key] == true; };
    if (!asked("with_pieces") && !asked("add_special")) {  // (add_special puts BOS in front)
      const auto back = bdsl::serve::detokenize_answer(nlohmann::json{{"tokens", tokens["tokens"]}}.dump(), tokenizer);
      if (back["content"] != request["content"]) std::abort();  // the text back, bytes for bytes
    }
  } catch (const bdsl::serve::ApiError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();
  }
  try {
    bdsl::serve::detokenize_answer(body, tokenizer);
  } catch (const bdsl::serve::ApiError& e) {
    if (e.status < 400 || e.status >= 500) std::abort();
  }
  return 0;
}
