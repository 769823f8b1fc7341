// Hands one request's text (and its tokens' log-probabilities, where asked) from the scheduler's
// thread to the HTTP thread answering it. The scheduler pushes text and then the end; the HTTP
// side takes whatever has arrived.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/request.h"

namespace bdsl::serve {

class TextChannel {
 public:
  struct Taken {
    std::string text;                  // everything pushed since the last take
    std::vector<models::TokenLogprobs> logprobs;  // likewise
    std::optional<FinishReason> end;   // set once the request ended (text is then the last)
    Usage usage;
  };

  void push(std::string_view text) {
    {
      std::lock_guard lock(mutex_);
      text_ += text;
    }
    ready_.notify_one();
  }
  void push(const models::TokenLogprobs& logprobs) {
    {
      std::lock_guard lock(mutex_);
      logprobs_.push_back(logprobs);
    }
    ready_.notify_one();
  }
  void finish(FinishReason reason, const Usage& usage) {
    {
      std::lock_guard lock(mutex_);
      end_ = reason;
      usage_ = usage;
    }
    ready_.notify_one();
  }

  // Waits until there is text, log-probabilities or the end, at most `timeout`; may return nothing.
  Taken take(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !text_.empty() || !logprobs_.empty() || end_; });
    return take_locked();
  }
  // Waits for the end; returns all the text.
  Taken take_all() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return end_.has_value(); });
    return take_locked();
  }
  // Waits for the end, at most `timeout`: none, or all the text.
  std::optional<Taken> take_all(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_for(lock, timeout, [&] { return end_.has_value(); })) return std::nullopt;
    return take_locked();
  }

 private:
  Taken take_locked() {
    Taken t{std::move(text_), std::move(logprobs_), end_, usage_};
    text_.clear();
    logprobs_.clear();
    return t;
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::string text_;
  std::vector<models::TokenLogprobs> logprobs_;
  std::optional<FinishReason> end_;
  Usage usage_;
};

}  // namespace bdsl::serve
