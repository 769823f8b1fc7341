#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "models/tokenizer/token_stream.h"
#include "serve/stop_matcher.h"

namespace bdsl::serve {

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Shutdown: return "shutdown";
    case FinishReason::Error: return "error";
  }
  return "?";
}

// A request in a slot: where its prompt and generation stand, and its text state.
struct Scheduler::Sequence {
  Sequence(std::shared_ptr<Ticket> t, const models::Tokenizer& tok, uint64_t order)
      : ticket(std::move(t)), text(tok), stop(ticket->request_.stop),
        admitted(order) {}

  const GenerationRequest& request() const { return ticket->request_; }
  bool prefilling() const { return prefilled < request().prompt.size(); }

  std::shared_ptr<Ticket> ticket;
  models::TokenStreamDecoder text;
  StopMatcher stop;
  uint64_t admitted;
  uint32_t prefilled = 0;  // prompt tokens in the slot's cache or in submitted steps
  uint32_t pos = 0;        // where the next entry decodes: submitted steps fill positions 0..pos-1
  int32_t next = -1;       // sampled and not yet decoded (where fed_entry is -1)
  int32_t fed_entry = -1;  // its entry in the step submitted last, whose output is the next token
  uint32_t in_flight = 0;  // its outputs in submitted steps not collected yet
  uint32_t generated = 0;
};

namespace {
uint64_t nanoseconds_since(std::chrono::steady_clock::time_point t0) {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}
}  // namespace

Scheduler::Scheduler(models::BatchDecoder& decoder, const models::Tokenizer& tokenizer, SchedulerOptions options)
    : decoder_(decoder),
      tokenizer_(tokenizer),
      slots_(decoder.slots()),
      context_(decoder.context_length()),
      queue_capacity_(options.queue_capacity ? options.queue_capacity : 4 * decoder.slots()),
      running_(decoder.slots()) {
  worker_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { shutdown(); }

void Scheduler::validate(const GenerationRequest& r) const {
  if (r.prompt.empty()) throw std::invalid_argument("the prompt is empty");
  if (r.prompt.size() >= context_)
    throw std::length_error("the prompt has " + std::to_string(r.prompt.size()) +
                            " tokens; the context holds " + std::to_string(context_) +
                            " (prompt and completion together)");
  for (int32_t id : r.prompt)
    if (id < 0 || uint32_t(id) >= decoder_.vocab_size())
      throw std::invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary");
  if (r.max_tokens == 0) throw std::invalid_argument("max_tokens must be at least 1");
  models::check_sampling(r.sampling, decoder_.top_k());
  if (r.logprobs >= 0 && !decoder_.has_logprobs()) throw std::invalid_argument("this decoder gives no log-probabilities");
  if (r.prompt_logprobs && r.logprobs < 0) throw std::invalid_argument("the prompt's log-probabilities need logprobs >= 0");
  if (r.logprobs > int32_t(decoder_.max_top_logprobs()))
    throw std::invalid_argument("log-probabilities of " + std::to_string(r.logprobs) + " alternatives asked; at most " +
                                std::to_string(decoder_.max_top_logprobs()));
}

std::shared_ptr<Scheduler::Ticket> Scheduler::submit(GenerationRequest request) {
  std::vector<GenerationRequest> one;
  one.push_back(std::move(request));
  return submit_group(std::move(one))[0];
}

std::vector<std::shared_ptr<Scheduler::Ticket>> Scheduler::submit_group(std::vector<GenerationRequest> requests) {
  if (requests.empty()) throw std::invalid_argument("no request to queue");
  if (requests.size() > queue_capacity_)
    throw std::invalid_argument(std::to_string(requests.size()) + " generations in one request; this server queues at most " +
                                std::to_string(queue_capacity_));
  for (const auto& r : requests) validate(r);
  std::vector<std::shared_ptr<Ticket>> tickets;
  for (auto& r : requests) tickets.emplace_back(new Ticket(std::move(r)));
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw ShuttingDown("the server is shutting down");
    if (queue_.size() + tickets.size() > queue_capacity_) {
      ++rejected_;
      throw QueueFull(std::to_string(queue_.size()) + " of " + std::to_string(queue_capacity_) + " waiting places are taken" +
                      (tickets.size() > 1 ? " and this request needs " + std::to_string(tickets.size()) : std::string()));
    }
    queue_.insert(queue_.end(), tickets.begin(), tickets.end());
    queued_ = uint32_t(queue_.size());
  }
  wake_.notify_one();
  return tickets;
}

void Scheduler::shutdown() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (worker_.joinable()) worker_.join();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.slots = slots_;
  s.active_slots = active_;
  s.queue_length = queued_;
  s.queue_capacity = queue_capacity_;
  s.prompt_tokens = prompt_tokens_;
  s.generated_tokens = generated_;
  s.requests_finished = finished_;
  s.requests_cancelled = cancelled_;
  s.requests_rejected = rejected_;
  s.busy_seconds = double(busy_ns_) * 1e-9;
  s.prefill_seconds = double(prefill_ns_) * 1e-9;
  s.prefills = prefills_;
  s.shared_prompt_tokens = shared_prompt_tokens_;
  s.decode_steps = decode_steps_;
  return s;
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || active_ > 0 || !in_flight_.empty(); });
      if (stopping_) break;
    }
    admit();
    drop_cancelled();
    prefill_some();
    // The next step goes in before the one in flight is read, so the device always has one queued.
    const bool submitted = submit_step();
    if (!in_flight_.empty() && (in_flight_.size() >= models::BatchDecoder::kMaxSubmitted || !submitted)) collect_step();
  }
  // Shutting down: every request still here ends now (the steps in flight first: nothing reads them).
  while (!in_flight_.empty()) collect_step(false);
  drop_cancelled();
  for (uint32_t s = 0; s < slots_; ++s)
    if (running_[s]) finish(s, FinishReason::Shutdown);
  std::deque<std::shared_ptr<Ticket>> left;
  {
    std::lock_guard lock(mutex_);
    left.swap(queue_);
    queued_ = 0;
  }
  for (auto& t : left) {
    ++finished_;
    if (t->request_.on_finish) t->request_.on_finish(FinishReason::Shutdown, {uint32_t(t->request_.prompt.size()), 0});
  }
}

void Scheduler::admit() {
  std::lock_guard lock(mutex_);
  for (uint32_t s = 0; s < slots_ && !queue_.empty(); ++s) {
    if (running_[s]) continue;
    running_[s] = std::make_unique<Sequence>(std::move(queue_.front()), tokenizer_, admitted_++);
    queue_.pop_front();
    ++active_;
  }
  queued_ = uint32_t(queue_.size());
}

// Cancelled requests leave at once, whether running or still waiting (a waiting one would
// otherwise hold a queue place until a slot frees).
void Scheduler::drop_cancelled() {
  for (uint32_t s = 0; s < slots_; ++s)
    if (running_[s] && running_[s]->ticket->cancelled_) finish(s, FinishReason::Cancelled);
  std::vector<std::shared_ptr<Ticket>> dropped;
  {
    std::lock_guard lock(mutex_);
    for (auto it = queue_.begin(); it != queue_.end();)
      if ((*it)->cancelled_) dropped.push_back(std::move(*it)), it = queue_.erase(it);
      else ++it;
    queued_ = uint32_t(queue_.size());
  }
  for (auto& t : dropped) {
    ++finished_, ++cancelled_;
    if (t->request_.on_finish) t->request_.on_finish(FinishReason::Cancelled, {uint32_t(t->request_.prompt.size()), 0});
  }
}

// Prompt chunks of the waiting sequences, oldest first, up to one chunk's worth of tokens
// (max_prefill_chunk) and kMaxPrefillsPerStep chunks between two decode steps: many short prompts
// start together, and the streams already decoding wait for at most that much prompt work.
bool Scheduler::prompt_in_steps(const Sequence& seq) const {
  return seq.request().prompt.size() <= decoder_.max_step_prompt() && !scores_prompt(seq.request());
}

void Scheduler::prefill_some() {
  uint32_t tokens = 0;
  for (uint32_t chunks = 0; chunks < kMaxPrefillsPerStep; ++chunks) {
    std::optional<uint32_t> oldest;
    for (uint32_t s = 0; s < slots_; ++s)
      if (running_[s] && running_[s]->prefilling() && !prompt_in_steps(*running_[s]) &&
          (!oldest || running_[s]->admitted < running_[*oldest]->admitted))
        oldest = s;
    if (!oldest) return;
    const uint32_t left = uint32_t(running_[*oldest]->request().prompt.size()) - running_[*oldest]->prefilled;
    const uint32_t n = std::min(decoder_.max_prefill_chunk(), left);
    if (tokens > 0 && tokens + n > decoder_.max_prefill_chunk()) return;
    prefill_chunk(*oldest, n);
    tokens += n;
  }
}

// The slots whose sequences take the chunk of `slot`'s alike: the same prompt, read as far, and
// neither scoring its prompt (slot first). A prompt asked for n times is read once.
std::vector<uint32_t> Scheduler::sharers_of(uint32_t slot) const {
  const Sequence& seq = *running_[slot];
  std::vector<uint32_t> out{slot};
  if (scores_prompt(seq.request())) return out;
  for (uint32_t s = 0; s < slots_; ++s) {
    const Sequence* other = running_[s].get();
    if (s != slot && other && other->prefilling() && !prompt_in_steps(*other) && !scores_prompt(other->request()) &&
        other->prefilled == seq.prefilled && other->request().prompt == seq.request().prompt)
      out.push_back(s);
  }
  return out;
}

void Scheduler::prefill_chunk(uint32_t slot, uint32_t n) {
  Sequence& seq = *running_[slot];
  const auto& prompt = seq.request().prompt;
  const auto chunk = std::span(prompt).subspan(seq.prefilled, n);
  const std::vector<uint32_t> slots = sharers_of(slot);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<models::StepOutput> out;
  // The prompt's own log-probabilities: row i's logits score the token after it (the last row's
  // next token is the first generated one: out.logprobs), on the device.
  models::PromptScoring scoring;
  std::vector<int32_t> next;
  if (scores_prompt(seq.request())) {
    for (uint32_t i = 0; i < n; ++i) {
      const size_t at = size_t(seq.prefilled) + i + 1;
      next.push_back(at < prompt.size() ? prompt[at] : -1);
    }
    scoring = {next, uint32_t(seq.request().logprobs), [&](uint32_t, const models::TokenLogprobs& lp) {
                 if (seq.request().on_logprobs) seq.request().on_logprobs(lp);
               }};
  }
  try {
    if (slots.size() == 1) {
      out.push_back(decoder_.prefill(slot, chunk, seq.prefilled, seq.request().sampling, seq.request().logprobs, scoring));
    } else {
      std::vector<models::BatchDecoder::Sharer> sharers;
      for (uint32_t s : slots)
        sharers.push_back({s, running_[s]->request().sampling, running_[s]->request().logprobs});
      out = decoder_.prefill_shared(sharers, chunk, seq.prefilled);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve: prefill failed: %s\n", e.what());
    for (uint32_t s : slots) finish(s, FinishReason::Error);
    return;
  }
  const uint64_t ns = nanoseconds_since(t0);
  busy_ns_ += ns;
  prefill_ns_ += ns;
  ++prefills_;
  prompt_tokens_ += uint64_t{n} * slots.size();
  shared_prompt_tokens_ += uint64_t{n} * (slots.size() - 1);
  for (size_t i = 0; i < slots.size(); ++i) {
    Sequence& s = *running_[slots[i]];
    s.prefilled += n;
    if (s.prefilling()) continue;
    s.pos = s.prefilled;
    accept(slots[i], out[i].token, s.pos, out[i].logprobs);
  }
}

// One decode step over every sequence that is generating (its token given, or fed by the step
// submitted before: Entry::previous), with the short prompts' tokens in the spare entries. A
// sequence takes no entry once its submitted outputs reach its max_tokens or the context.
bool Scheduler::submit_step() {
  std::vector<models::BatchDecoder::Entry> batch;
  InFlightStep step;
  std::vector<std::pair<uint32_t, int32_t>> decoding;  // slot, its entry
  for (uint32_t s = 0; s < slots_; ++s) {
    Sequence* seq = running_[s].get();
    if (!seq || seq->prefilling()) continue;
    if (seq->pos >= context_ || seq->generated + seq->in_flight >= seq->request().max_tokens) continue;
    if (seq->fed_entry < 0 && seq->next < 0) continue;  // its token is in a step not yet collected
    models::BatchDecoder::Entry e{s, seq->next, seq->pos, seq->request().sampling};
    if (seq->fed_entry >= 0) e.previous = seq->fed_entry, e.token = 0;
    e.logprobs = seq->request().logprobs;
    decoding.emplace_back(s, int32_t(batch.size()));
    batch.push_back(e);
    step.owners.push_back({s, seq->admitted, true, seq->pos + 1});
  }
  // Short prompts take the step's spare entries, oldest first: a run of each one's next tokens.
  std::vector<uint32_t> waiting;
  for (uint32_t s = 0; s < slots_; ++s)
    if (running_[s] && running_[s]->prefilling() && prompt_in_steps(*running_[s])) waiting.push_back(s);
  std::sort(waiting.begin(), waiting.end(), [&](uint32_t a, uint32_t b) { return running_[a]->admitted < running_[b]->admitted; });
  struct Run {
    uint32_t slot, tokens;
    int32_t last_entry;  // the prompt's last token's entry, or -1 where the prompt goes on
  };
  std::vector<Run> runs;
  for (uint32_t s : waiting) {
    const Sequence& seq = *running_[s];
    const auto& prompt = seq.request().prompt;
    Run run{s, 0, -1};
    for (uint32_t p = seq.prefilled; p < prompt.size() && batch.size() < decoder_.step_capacity(); ++p, ++run.tokens) {
      const bool last = p + 1 == prompt.size();
      if (last) run.last_entry = int32_t(batch.size());
      batch.push_back({s, prompt[p], p, seq.request().sampling});
      if (last) batch.back().logprobs = seq.request().logprobs;
      step.owners.push_back({s, seq.admitted, last, p + 1});
    }
    if (run.tokens) runs.push_back(run);
  }
  for (auto& r : running_)
    if (r) r->fed_entry = -1;  // `previous` names an entry of the step submitted last only
  if (batch.empty()) return false;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    step.ticket = decoder_.submit(batch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve: decode failed: %s\n", e.what());
    for (const auto& entry : batch)
      if (running_[entry.slot]) finish(entry.slot, FinishReason::Error);
    return false;
  }
  busy_ns_ += nanoseconds_since(t0);
  // Each output's token is taken on by the next step on the device (fed_entry).
  auto awaits = [](Sequence& seq, int32_t entry) {
    seq.fed_entry = entry;
    seq.next = -1;
    ++seq.in_flight;
  };
  for (const auto& [slot, entry] : decoding) {
    ++running_[slot]->pos;
    awaits(*running_[slot], entry);
  }
  for (const Run& run : runs) {
    Sequence& seq = *running_[run.slot];
    seq.prefilled += run.tokens;
    prompt_tokens_ += run.tokens;
    if (run.last_entry < 0) continue;
    seq.pos = seq.prefilled;
    awaits(seq, run.last_entry);
  }
  in_flight_.push_back(std::move(step));
  return true;
}

// The oldest step in flight: each output's token to its sequence, if it is still the one in its
// slot (`deliver`: false while shutting down).
void Scheduler::collect_step(bool deliver) {
  InFlightStep step = std::move(in_flight_.front());
  in_flight_.pop_front();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<models::StepOutput> outs;
  try {
    outs = decoder_.collect(step.ticket);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve: decode failed: %s\n", e.what());
    for (const auto& o : step.owners)
      if (running_[o.slot] && running_[o.slot]->admitted == o.admitted) finish(o.slot, FinishReason::Error);
    return;
  }
  busy_ns_ += nanoseconds_since(t0);
  ++decode_steps_;
  if (!deliver) return;
  for (size_t i = 0; i < step.owners.size(); ++i) {
    const auto& o = step.owners[i];
    if (!o.output || !running_[o.slot] || running_[o.slot]->admitted != o.admitted) continue;  // it ended meanwhile
    --running_[o.slot]->in_flight;
    accept(o.slot, outs[i].token, o.out_pos, outs[i].logprobs);
  }
}

// A sampled token: text out, then the checks that may end the sequence (the same order as
// models::Generator: end of generation, stop string, token limit, full context).
void Scheduler::accept(uint32_t slot, int32_t token, uint32_t position, const std::optional<models::TokenLogprobs>& logprobs) {
  Sequence& seq = *running_[slot];
  ++seq.generated;
  ++generated_;
  if (tokenizer_.is_end_of_generation(token)) return finish(slot, FinishReason::Stop);
  if (logprobs && seq.request().on_logprobs) seq.request().on_logprobs(*logprobs);
  const auto piece = seq.stop.push(seq.text.push(token));
  emit(seq, piece.text);
  if (piece.stopped) return finish(slot, FinishReason::Stop, false);
  if (seq.generated >= seq.request().max_tokens || position >= context_) return finish(slot, FinishReason::Length);
  if (seq.fed_entry < 0) seq.next = token;  // else the step submitted last takes it on the device
}

void Scheduler::emit(Sequence& seq, const std::string& text) {
  if (!text.empty() && seq.request().on_text) seq.request().on_text(text);
}

// Ends the sequence in `slot` and frees the slot. With `release_held`, text still held back (an
// unfinished UTF-8 character, a possible start of a stop string) goes out first, for the ends
// that complete an answer; after a stop string there is nothing more to send.
void Scheduler::finish(uint32_t slot, FinishReason reason, bool release_held) {
  auto seq = std::move(running_[slot]);
  --active_;
  ++finished_;
  if (reason == FinishReason::Cancelled) ++cancelled_;
  if (release_held && (reason == FinishReason::Length || reason == FinishReason::Stop)) {
    const auto tail = seq->stop.push(seq->text.flush());
    emit(*seq, tail.text);
    if (!tail.stopped) emit(*seq, seq->stop.flush());
  }
  if (seq->request().on_finish)
    seq->request().on_finish(reason, {uint32_t(seq->request().prompt.size()), seq->generated});
}

}  // namespace bdsl::serve
