// Hands one HTTP request's text (and its tokens' log-probabilities, where asked) from the
// scheduler's thread to the HTTP thread answering it, for each of the request's choices (n, or
// several prompts: one generation each). The scheduler pushes a choice's text and then its end;
// the HTTP side takes whatever has arrived, for all choices at once.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serve/request.h"

namespace bdsl::serve {

class TextChannel {
 public:
  // One choice's news since the last take.
  struct Taken {
    std::string text;
    std::vector<models::TokenLogprobs> logprobs;
    std::optional<FinishReason> end;  // set once, in the take after the choice ended (text is then its last)
    Usage usage;                      // with end
    bool empty() const { return text.empty() && logprobs.empty() && !end; }
  };

  explicit TextChannel(size_t choices = 1) : news_(choices) {}
  size_t choices() const { return news_.size(); }

  void push(size_t choice, std::string_view text) {
    {
      std::lock_guard lock(mutex_);
      news_.at(choice).text += text;
    }
    ready_.notify_one();
  }
  void push(size_t choice, const models::TokenLogprobs& logprobs) {
    {
      std::lock_guard lock(mutex_);
      news_.at(choice).logprobs.push_back(logprobs);
    }
    ready_.notify_one();
  }
  void finish(size_t choice, FinishReason reason, const Usage& usage) {
    {
      std::lock_guard lock(mutex_);
      Taken& c = news_.at(choice);
      c.end = reason;
      c.usage = usage;
      ++ended_;
      failed_ = failed_ || !is_answer(reason);
    }
    ready_.notify_one();
  }

  // Whether a choice ended without an answer (cancelled, shut down, failed): the request then
  // fails as a whole, and its other choices need not run on.
  bool failed() {
    std::lock_guard lock(mutex_);
    return failed_;
  }
  // Waits until some choice has news, at most `timeout`; every choice's news, by index (all
  // empty when there was none).
  std::vector<Taken> take(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return has_news(); });
    return take_locked();
  }
  // Waits until every choice ended, at most `timeout`: none, or each choice's whole text.
  std::optional<std::vector<Taken>> take_all(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_for(lock, timeout, [&] { return ended_ == news_.size(); })) return std::nullopt;
    return take_locked();
  }
  // Waits until every choice ended; each choice's whole text.
  std::vector<Taken> take_all() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return ended_ == news_.size(); });
    return take_locked();
  }

 private:
  bool has_news() const {
    for (const Taken& c : news_)
      if (!c.empty()) return true;
    return false;
  }
  std::vector<Taken> take_locked() {
    std::vector<Taken> out;
    for (Taken& c : news_) out.push_back(std::exchange(c, Taken{}));
    return out;
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<Taken> news_;  // by choice
  size_t ended_ = 0;
  bool failed_ = false;
};

}  // namespace bdsl::serve
