#include "serve/answer.h"

#include <utility>

namespace bdsl::serve {

using nlohmann::json;

namespace {

// A token as an answer lists it (its logprob and alternatives filled in by the caller).
TokenLogprobText token_text(const models::Tokenizer& tokenizer, int32_t id) {
  const int32_t one[] = {id};
  return {std::string(tokenizer.token_bytes(id)), std::nullopt, {}, tokenizer.decode(one, false).size()};
}

// A choice's logprobs: null where the request asked for none. `offset`: the completions' text
// offset so far (moved on); `first`: a prompt's first token before them (unscored).
json logprobs_json(const models::Tokenizer& tokenizer, const AnswerShape& shape, const std::vector<models::TokenLogprobs>& v,
                   size_t& offset, std::optional<int32_t> first = std::nullopt) {
  if (!shape.logprobs) return nullptr;
  std::vector<TokenLogprobText> texts;
  if (first) texts.push_back(token_text(tokenizer, *first));
  for (const auto& lp : v) {
    TokenLogprobText t = token_text(tokenizer, lp.chosen.token);
    t.logprob = lp.chosen.logprob;
    for (const auto& a : lp.top) t.top.emplace_back(std::string(tokenizer.token_bytes(a.token)), a.logprob);
    texts.push_back(std::move(t));
  }
  return shape.header.chat ? chat_logprobs_json(texts) : completion_logprobs_json(texts, offset);
}

// A choice's usage into the answer's: its prompt once (the prompt's first choice), its tokens.
void add_usage(Usage& total, const AnswerShape& shape, size_t choice, const Usage& u) {
  if (choice % shape.n == 0) total.prompt_tokens += u.prompt_tokens;
  total.completion_tokens += u.completion_tokens;
}

}  // namespace

ApiError unfinished(FinishReason r) {
  if (r == FinishReason::Cancelled)  // nobody reads it: the client is gone
    return ApiError(499, "the client closed the connection", std::nullopt, "client_closed", "invalid_request_error");
  if (r == FinishReason::Shutdown)
    return ApiError(503, "the server is shutting down", std::nullopt, "shutting_down", "server_error");
  return server_error("generation failed on the device", "generation_failed");
}

json whole_answer(const AnswerShape& shape, const models::Tokenizer& tokenizer, const std::vector<TextChannel::Taken>& choices) {
  for (const auto& c : choices)
    if (!is_answer(*c.end)) throw unfinished(*c.end);
  json out = json::array();
  Usage usage;
  for (size_t k = 0; k < choices.size(); ++k) {
    const auto& c = choices[k];
    const size_t prompt = k / shape.n;
    const bool echo = !shape.echo_text.empty();
    size_t offset = 0;
    const json logprobs = logprobs_json(tokenizer, shape, c.logprobs, offset,
                                        echo ? std::optional<int32_t>(shape.echo_first[prompt]) : std::nullopt);
    out.push_back(choice_json(shape.header, uint32_t(k), echo ? shape.echo_text[prompt] + c.text : c.text, *c.end, logprobs));
    add_usage(usage, shape, k, c.usage);
  }
  return completion_json(shape.header, std::move(out), usage);
}

AnswerStream::AnswerStream(AnswerShape shape, const models::Tokenizer& tokenizer, std::shared_ptr<TextChannel> channel)
    : shape_(std::move(shape)),
      tokenizer_(tokenizer),
      channel_(std::move(channel)),
      text_offset_(channel_->choices(), 0),
      ended_(channel_->choices(), false) {}

std::string AnswerStream::next(std::chrono::milliseconds poll) {
  std::string out;
  if (!started_ && shape_.header.chat)  // each chat choice opens with the role
    for (size_t k = 0; k < ended_.size(); ++k) out += sse_event(chunk_json(shape_.header, uint32_t(k), "", std::nullopt, true));
  started_ = true;
  const auto taken = channel_->take(poll);
  for (size_t k = 0; k < taken.size(); ++k) {
    const auto& t = taken[k];
    if (!t.text.empty() || !t.logprobs.empty())
      out += sse_event(chunk_json(shape_.header, uint32_t(k), t.text, std::nullopt, false,
                                  logprobs_json(tokenizer_, shape_, t.logprobs, text_offset_[k])));
    if (!t.end) continue;
    if (!is_answer(*t.end)) {  // the whole stream fails: its other choices are cancelled by the caller
      done_ = true;
      return out + sse_event(unfinished(*t.end).to_json()) + kSseDone;
    }
    out += sse_event(chunk_json(shape_.header, uint32_t(k), "", *t.end));
    add_usage(usage_, shape_, k, t.usage);
    ended_[k] = true;
  }
  for (bool e : ended_)
    if (!e) return out;
  if (shape_.include_usage) out += sse_event(usage_chunk_json(shape_.header, usage_));
  done_ = true;
  return out + kSseDone;
}

}  // namespace bdsl::serve
