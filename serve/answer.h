// One HTTP request's choices (n per prompt; a completions request may hold several prompts), as
// OpenAI answers them: one JSON once every choice ended, or server-sent events as text arrives.
// Choice k is prompt k / n's (k % n)-th; the usage counts each prompt once and every choice's tokens.
#pragma once
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/tokenizer/tokenizer.h"
#include "serve/api_error.h"
#include "serve/openai_response.h"
#include "serve/text_channel.h"

namespace bdsl::serve {

// The ends that are not an answer, as the error a client gets (HTTP status, or an SSE error event).
ApiError unfinished(FinishReason r);

struct AnswerShape {
  ResponseHeader header;
  uint32_t n = 1;             // choices per prompt
  bool logprobs = false;      // asked for
  bool include_usage = false; // a stream's last event before [DONE] is the usage
  // Per prompt, with echo: its text, written before each of its choices' text, and its first
  // token, listed unscored before the tokens' log-probabilities. Empty without echo.
  std::vector<std::string> echo_text;
  std::vector<int32_t> echo_first;
};

// The whole answer from every choice's whole text (TextChannel::take_all). Throws the ApiError of
// the first choice that did not end in an answer.
nlohmann::json whole_answer(const AnswerShape& shape, const models::Tokenizer& tokenizer,
                            const std::vector<TextChannel::Taken>& choices);

// A streamed answer between calls of the HTTP library's content provider.
class AnswerStream {
 public:
  AnswerStream(AnswerShape shape, const models::Tokenizer& tokenizer, std::shared_ptr<TextChannel> channel);
  // The next piece of the event stream, waiting at most `poll` for news ("" when none yet). A
  // token's log-probabilities go with the text that arrived with them (its text may come a chunk
  // later: a stop string's start or an unfinished character is held back). A choice that fails
  // ends the stream with OpenAI's error event.
  std::string next(std::chrono::milliseconds poll);
  bool done() const { return done_; }

 private:
  AnswerShape shape_;
  const models::Tokenizer& tokenizer_;
  std::shared_ptr<TextChannel> channel_;
  std::vector<size_t> text_offset_;  // per choice: the completions' byte offset so far
  std::vector<bool> ended_;
  Usage usage_;
  bool started_ = false;
  bool done_ = false;
};

}  // namespace bdsl::serve
