// Continuous batching over a BatchDecoder. Requests wait in a bounded queue, take a free slot
// (a KV-cache slot of the decoder) as soon as one frees up, and leave it the moment they end.
// Each turn of the worker thread:
//   1. admits waiting requests into free slots and drops cancelled ones (their slot is free at once);
//   2. runs prompt chunks of the sequences still reading prompts longer than the decoder's
//      max_step_prompt, oldest first, up to max_prefill_chunk tokens and kMaxPrefillsPerStep
//      chunks in all: a long prompt delays the streams already decoding by one chunk a step;
//   3. submits ONE decode step over every sequence that is generating, with the tokens of the
//      short prompts (up to max_step_prompt tokens each) in the step's spare entries, oldest
//      first: many short prompts start together and cost the running streams little;
//   4. collects the step submitted in the turn before: text out, ends checked.
// Steps are pipelined (models::BatchDecoder::submit): a sequence's entry in a step takes its
// token from its output in the step before on the device (Entry::previous), so the next step is
// queued before the host reads the one before, and the device never waits for the host. A
// sequence that ends when its output is read has one more token computed in the step already
// submitted; that token is dropped.
// Each entry carries its request's sampling settings; the decoder picks the token (on the device
// for the batched BitNet decoder), each draw a function of the seed and the token's position, so
// a request gives the same text whether it runs alone or beside others.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "models/batch_decoder.h"
#include "models/tokenizer/tokenizer.h"
#include "serve/request.h"

namespace bdsl::serve {

// submit() when the wait queue is full: the caller should try again later (HTTP 503).
struct QueueFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// submit() after shutdown() began.
struct ShuttingDown : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SchedulerOptions {
  uint32_t queue_capacity = 0;  // requests waiting for a slot; 0: 4 per slot
};

// Counters since start, for /metrics. Read while the worker runs: each value is atomic on its own.
struct SchedulerStats {
  uint32_t slots = 0;
  uint32_t active_slots = 0;
  uint32_t queue_length = 0;
  uint32_t queue_capacity = 0;
  uint64_t prompt_tokens = 0;       // prefilled or run in decode steps
  uint64_t shared_prompt_tokens = 0;  // of which a sequence took from another's chunk of the same prompt
  uint64_t generated_tokens = 0;    // sampled
  uint64_t requests_finished = 0;   // every end, cancellations included
  uint64_t requests_cancelled = 0;
  uint64_t requests_rejected = 0;   // queue full
  double busy_seconds = 0;          // spent in prefill() and in submitting and collecting decode steps
  double prefill_seconds = 0;       // of which in prefill()
  uint64_t prefills = 0, decode_steps = 0;
};

class Scheduler {
 public:
  // A submitted request; cancel() ends it (on_finish gets Cancelled) and frees its slot at the
  // worker's next turn. Safe from any thread, also after the request ended.
  class Ticket {
   public:
    void cancel() { cancelled_ = true; }

   private:
    friend class Scheduler;
    explicit Ticket(GenerationRequest r) : request_(std::move(r)) {}
    GenerationRequest request_;
    std::atomic<bool> cancelled_{false};
  };

  Scheduler(models::BatchDecoder& decoder, const models::Tokenizer& tokenizer, SchedulerOptions options = {});
  ~Scheduler();  // shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws QueueFull, ShuttingDown, std::length_error (the prompt leaves no room
  // in the context) or std::invalid_argument (empty prompt, an id outside the vocabulary, max_tokens
  // 0, sampling options the sampler or the decoder cannot do).
  std::shared_ptr<Ticket> submit(GenerationRequest request);
  // Queues requests together (one HTTP request's choices): all of them, or none (QueueFull).
  // Throws std::invalid_argument as submit() does, and when there are more than the queue holds.
  std::vector<std::shared_ptr<Ticket>> submit_group(std::vector<GenerationRequest> requests);
  // Stops taking requests, ends every queued and running one (on_finish gets Shutdown) and joins
  // the worker. Idempotent.
  void shutdown();

  SchedulerStats stats() const;
  uint32_t slots() const { return slots_; }
  uint32_t context_length() const { return context_; }
  uint32_t queue_capacity() const { return queue_capacity_; }
  // Alternatives a token's log-probabilities may list (GenerationRequest::logprobs); -1: the
  // decoder gives none.
  int32_t max_top_logprobs() const { return decoder_.has_logprobs() ? int32_t(decoder_.max_top_logprobs()) : -1; }

 private:
  struct Sequence;
  void run();
  void admit();
  void drop_cancelled();
  void prefill_some();
  void prefill_chunk(uint32_t slot, uint32_t n);
  static constexpr uint32_t kMaxPrefillsPerStep = 16;
  // A submitted step: whose each entry is (the sequence by admission order: a slot may have
  // changed hands by the time it is collected), and where an output's token would be decoded.
  struct InFlightStep {
    uint64_t ticket = 0;
    struct Owner {
      uint32_t slot;
      uint64_t admitted;
      bool output;       // a decoding entry, or a prompt's last token
      uint32_t out_pos;  // the position of the token it gives
    };
    std::vector<Owner> owners;
  };
  bool submit_step();                     // false: no sequence had an entry
  void collect_step(bool deliver = true);
  bool prompt_in_steps(const Sequence& seq) const;  // its prompt runs as entries of decode steps
  std::vector<uint32_t> sharers_of(uint32_t slot) const;
  static bool scores_prompt(const GenerationRequest& r) { return r.prompt_logprobs && r.logprobs >= 0; }
  // `token` for the sequence in `slot`, to be decoded at `position`, with its log-probabilities
  // where the request asked for them.
  void accept(uint32_t slot, int32_t token, uint32_t position, const std::optional<models::TokenLogprobs>& logprobs);
  void finish(uint32_t slot, FinishReason reason, bool release_held = true);
  void emit(Sequence& seq, const std::string& text);
  void validate(const GenerationRequest& r) const;

  models::BatchDecoder& decoder_;
  const models::Tokenizer& tokenizer_;
  const uint32_t slots_;
  const uint32_t context_;
  const uint32_t queue_capacity_;

  mutable std::mutex mutex_;  // guards queue_ and stopping_
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Ticket>> queue_;
  bool stopping_ = false;

  std::vector<std::unique_ptr<Sequence>> running_;  // by slot; null: free. The worker's alone.
  uint64_t admitted_ = 0;                           // admission order, for prefill fairness
  std::deque<InFlightStep> in_flight_;              // submitted steps, oldest first. The worker's alone.

  std::atomic<uint32_t> active_{0}, queued_{0};
  std::atomic<uint64_t> prompt_tokens_{0}, generated_{0}, finished_{0}, cancelled_{0}, rejected_{0}, busy_ns_{0}, prefill_ns_{0}, prefills_{0}, decode_steps_{0}, shared_prompt_tokens_{0};
  std::thread worker_;
};

}  // namespace bdsl::serve
