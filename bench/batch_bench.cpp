// Many sequences at once: decode_batch/ times one decode step of B sequences (each at position
// ctx - 1 of its own cache) on the batched decoder, and serve/ drives the real HTTP server on
// loopback with C concurrent clients, as a user's load would.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "bench/bench_registry.h"
#include "models/bitnet/batch_decoder.h"
#include "models/bitnet/bitnet_model.h"
#include "models/tokenizer/tokenizer.h"
#include "serve/scheduler.h"
#include "serve/server.h"

namespace bdsl::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A model capped at `context` positions (the batch's caches take slots x context rows) with
// `slots` sequences, each prefilled to `filled` positions.
struct BatchState {
  models::GgufFile file;
  models::BitNetConfig config;
  std::unique_ptr<bitnet::BitNetModel> model;
  std::unique_ptr<bitnet::BitNetBatchDecoder> decoder;
  uint32_t filled = 0;
};

// BenchSession::model_states keys: greedy only, the same with timestamps, and with the server's
// 128 candidates a step for sampling.
constexpr int kBatchState = 100, kTimedBatchState = 101, kSamplingBatchState = 102, kTimedSamplingBatchState = 103;
constexpr uint32_t kServerCandidates = 128;  // what `bitnet-dsl serve` loads

BatchState& batch_state(BenchSession& s, uint32_t slots, uint32_t context, uint32_t top_k, bool timed = false) {
  auto& slot = s.model_states[top_k ? (timed ? kTimedSamplingBatchState : kSamplingBatchState) : timed ? kTimedBatchState : kBatchState];
  auto state = std::static_pointer_cast<BatchState>(slot);
  if (!state) {
    auto file = models::GgufFile::open(s.model_path);
    auto config = models::BitNetConfig::from_gguf(file);
    config.context_length = std::min(config.context_length, context);
    state.reset(new BatchState{std::move(file), config, nullptr, nullptr});
    bitnet::ModelOptions o;
    o.top_k = top_k;
    o.prefill_projections = s.options.prefill_projections;
    o.decode_tuning = s.options.decode_tuning;
    o.exact_norm_scale = s.options.exact_norm_scale;
    state->model = std::make_unique<bitnet::BitNetModel>(*s.ctx, state->file, state->config, o);
    state->decoder = std::make_unique<bitnet::BitNetBatchDecoder>(*s.ctx, *state->model, slots, s.options.batch);
    state->decoder->set_timestamps(timed);
    slot = state;
  }
  return *state;
}

void fill_slots(BatchState& b, uint32_t positions) {
  if (b.filled >= positions) return;
  std::vector<int32_t> prompt(positions);
  for (uint32_t slot = 0; slot < b.decoder->slots(); ++slot) {
    for (uint32_t i = 0; i < positions; ++i) prompt[i] = int32_t((i * 7919 + slot * 104729 + 1) % b.config.vocab_size);
    b.decoder->prefill(slot, prompt, 0);
  }
  b.filled = positions;
}

// Steps of `batch` sequences at position ctx - 1, pipelined as the server runs them: each step's
// tokens are the step before's outputs, fed on the device (Entry::previous), and the next step is
// submitted before the one before is collected (`sync`: each step submitted and collected in
// turn, its tokens given by the host). `sampled`: each drawn on the GPU at `run`'s defaults
// (temperature 0.8, top-k 40, top-p 0.95, its own seed) from the server's 128 candidates.
// `logprobs` >= 0: every output asks for its log-probabilities and that many alternatives'.
void decode_batch(benchmark::State& st, BenchSession& s, uint32_t batch, uint32_t slots, uint32_t ctx_len, bool sampled = false,
                  bool sync = false, int32_t logprobs = -1) {
  auto& b = batch_state(s, slots, ctx_len, sampled || logprobs > 0 ? kServerCandidates : 0);
  fill_slots(b, ctx_len - 1);
  std::vector<models::BatchDecoder::Entry> given, fed;
  for (uint32_t i = 0; i < batch; ++i) {
    given.push_back({i, int32_t(i + 1), ctx_len - 1});
    if (sampled) given.back().sampling = {0.8f, 40, 0.95f, 0.0f, 1000u + i};
    given.back().logprobs = logprobs;
    fed.push_back(given.back());
    fed.back().previous = int32_t(i);
  }
  b.decoder->decode(given);  // records the bucket's step once
  std::deque<uint64_t> in_flight;
  if (!sync) in_flight.push_back(b.decoder->submit(given));
  double wall = 0;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    if (sync) {
      b.decoder->decode(given);
    } else {
      in_flight.push_back(b.decoder->submit(fed));
      b.decoder->collect(in_flight.front());
      in_flight.pop_front();
    }
    const double w = std::chrono::duration<double>(Clock::now() - t0).count();
    st.SetIterationTime(w);
    wall += w;
  }
  for (uint64_t t : in_flight) b.decoder->collect(t);
  const double steps = double(st.iterations());
  const auto stats = b.decoder->step_stats(b.decoder->bucket_for(batch));
  st.counters["tokens_per_s"] = steps * batch / wall;
  st.counters["ms_per_step"] = wall / steps * 1e3;
  st.counters["dispatches"] = stats.dispatches;
  st.counters["steps"] = stats.steps;
}

// The device's time a greedy step of `batch` sequences, the host doing nothing between steps (the
// step and tail replayed back to back, kSteps an iteration): against decode_batch/, what the
// host's turnaround (wait, read the tokens, write the next inputs, submit) costs a step.
void decode_batch_device(benchmark::State& st, BenchSession& s, uint32_t batch, uint32_t slots, uint32_t ctx_len) {
  constexpr uint32_t kSteps = 16;
  auto& b = batch_state(s, slots, ctx_len, 0);
  fill_slots(b, ctx_len - 1);
  std::vector<models::BatchDecoder::Entry> entries;
  for (uint32_t i = 0; i < batch; ++i) entries.push_back({i, int32_t(i + 1), ctx_len - 1});
  b.decoder->decode(entries);  // records the bucket's step and sets its inputs
  const uint32_t bucket = b.decoder->bucket_for(batch);
  double wall = 0;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    b.decoder->replay_greedy_steps(bucket, kSteps);
    const double w = std::chrono::duration<double>(Clock::now() - t0).count();
    st.SetIterationTime(w / kSteps);
    wall += w;
  }
  st.counters["tokens_per_s"] = double(st.iterations()) * kSteps * batch / wall;
  st.counters["ms_per_step"] = wall / (double(st.iterations()) * kSteps) * 1e3;
}

// Where a step of B sequences goes: GPU time per kernel (summed over its dispatches), largest
// first, on stderr; the counters hold the step's GPU span. Every sequence greedy, or drawn under
// `sampling` from the server's 128 candidates.
void decode_batch_ops(benchmark::State& st, BenchSession& s, uint32_t batch, uint32_t slots, uint32_t ctx_len,
                      const models::SamplerOptions& sampling = {}) {
  const bool greedy = models::is_greedy(sampling);
  auto& b = batch_state(s, slots, ctx_len, greedy ? 0 : kServerCandidates, true);
  fill_slots(b, ctx_len - 1);
  std::vector<models::BatchDecoder::Entry> entries;
  for (uint32_t i = 0; i < batch; ++i) entries.push_back({i, int32_t(i + 1), ctx_len - 1, sampling});
  const uint32_t bucket = b.decoder->bucket_for(batch);
  std::map<std::string, double> ns;
  std::map<std::string, uint32_t> calls;
  double span = 0;
  for (auto _ : st) {
    b.decoder->decode(entries);
    const auto names = b.decoder->step_operation_names(bucket, sampling);
    const auto times = b.decoder->step_timestamps_ns(bucket, sampling);
    calls.clear();
    for (size_t i = 0; i < names.size() && i < times.size(); ++i) ns[names[i]] += times[i], ++calls[names[i]];
    span += b.decoder->step_gpu_span_ns(bucket, sampling);
    st.SetIterationTime(b.decoder->step_gpu_span_ns(bucket, sampling) * 1e-9);
  }
  const double n = double(st.iterations());
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [name, t] : ns) order.push_back({t / n, name});
  std::sort(order.rbegin(), order.rend());
  const char* asked = greedy ? "" : models::draws_over_vocabulary(sampling) ? "_default" : "_sampled";
  fmt::print(stderr, "decode_batch_ops{}/B:{}: GPU us per step by kernel (calls), span {:.0f} us\n", asked, batch, span / n / 1e3);
  for (const auto& [t, name] : order) fmt::print(stderr, "  {:>9.1f}  {} ({})\n", t / 1e3, name, calls[name]);
  st.counters["span_us"] = span / n / 1e3;
}

// How serve/ clients ask: greedy; sampled at temperature 0.8, top-p 0.95, top-k 40, a seed each;
// or with OpenAI's defaults (no sampling field: temperature 1, every token of the vocabulary).
enum class Asking { Greedy, Sampled, Defaults };

// `clients` threads each send `requests` completions (`max_tokens` each) to the server, asking as
// `asking` says; every draw on the GPU.
void serve_load(benchmark::State& st, BenchSession& s, uint32_t clients, uint32_t ctx_len, uint32_t requests,
                uint32_t max_tokens, Asking asking = Asking::Greedy, uint32_t slots = 0) {
  const bool sampled = asking != Asking::Greedy;
  // The decoder is made once a process (the first family to ask sizes it): `slots`, else one a client.
  auto& b = batch_state(s, slots ? slots : clients, ctx_len, sampled ? kServerCandidates : 0);
  b.decoder->record_all_buckets();  // as `bitnet-dsl serve` does before it listens: no compile in the timing
  const auto tokenizer = models::Tokenizer::from_gguf(b.file);
  serve::Scheduler scheduler(*b.decoder, tokenizer, {clients * 2});
  serve::Server server(scheduler, tokenizer, {"127.0.0.1", 0, "bench", b.decoder->top_k()});
  const int port = server.bind();
  std::thread serving([&] { server.serve(); });
  for (auto _ : st) {
    std::atomic<uint64_t> tokens{0}, done{0}, failed{0};
    std::mutex failures_mutex;
    std::vector<std::string> failures;  // the first few, on stderr after the run
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (uint32_t c = 0; c < clients; ++c)
      threads.emplace_back([&, c] {
        httplib::Client client("127.0.0.1", port);
        client.set_read_timeout(600);
        for (uint32_t r = 0; r < requests; ++r) {
          nlohmann::json body = {{"model", "bench"},
                                 {"prompt", fmt::format("Request {} of client {}: tell a story", r, c)},
                                 {"max_tokens", max_tokens}};
          if (asking == Asking::Greedy) body["temperature"] = 0.0;
          if (asking == Asking::Sampled) body.update({{"temperature", 0.8}, {"top_p", 0.95}, {"top_k", 40}});
          if (sampled) body["seed"] = c * 1000 + r;
          const auto res = client.Post("/v1/completions", body.dump(), "application/json");
          if (!res || res->status != 200) {
            ++failed;
            const std::lock_guard lock(failures_mutex);
            if (failures.size() < 5)
              failures.push_back(res ? fmt::format("HTTP {}: {}", res->status, res->body.substr(0, 200))
                                     : httplib::to_string(res.error()));
            continue;
          }
          tokens += nlohmann::json::parse(res->body)["usage"]["completion_tokens"].get<uint64_t>();
          ++done;
        }
      });
    for (auto& t : threads) t.join();
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    st.SetIterationTime(wall);
    st.counters["tokens_per_s"] = double(tokens) / wall;
    st.counters["requests_per_s"] = double(done) / wall;
    st.counters["failed"] = double(failed);
    // Where the scheduler's time went: prompt chunks, decode steps, the rest (its own work and waits).
    const serve::SchedulerStats ss = scheduler.stats();
    st.counters["prefill_s"] = ss.prefill_seconds;
    st.counters["decode_s"] = ss.busy_seconds - ss.prefill_seconds;
    st.counters["prefills"] = double(ss.prefills);
    st.counters["decode_steps"] = double(ss.decode_steps);
    for (const auto& f : failures) fmt::print(stderr, "serve/: a request failed: {}\n", f);
  }
  server.stop();
  serving.join();
  scheduler.shutdown();
}

}  // namespace

void register_batch_benchmarks(BenchSession& s) {
  const bool quick = s.options.quick;
  const uint32_t slots = quick ? 4 : 64, ctx = quick ? 32 : 512;
  for (uint32_t batch : quick ? std::vector<uint32_t>{1, 4} : std::vector<uint32_t>{1, 2, 3, 4, 6, 8, 16, 32, 64})
    benchmark::RegisterBenchmark(fmt::format("decode_batch/B:{}", batch).c_str(),
                                 [&s, batch, slots, ctx](benchmark::State& st) { decode_batch(st, s, batch, slots, ctx); })
        ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMillisecond);
  for (uint32_t batch : quick ? std::vector<uint32_t>{4} : std::vector<uint32_t>{1, 64})
    benchmark::RegisterBenchmark(fmt::format("decode_batch_sync/B:{}", batch).c_str(),
                                 [&s, batch, slots, ctx](benchmark::State& st) { decode_batch(st, s, batch, slots, ctx, false, true); })
        ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMillisecond);
  for (uint32_t batch : quick ? std::vector<uint32_t>{4} : std::vector<uint32_t>{1, 64})
    benchmark::RegisterBenchmark(fmt::format("decode_batch_sampled/B:{}", batch).c_str(),
                                 [&s, batch, slots, ctx](benchmark::State& st) { decode_batch(st, s, batch, slots, ctx, true); })
        ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMillisecond);
  // Greedy, every output with its log-probabilities and 20 alternatives' (the full f32 head a step).
  for (uint32_t batch : quick ? std::vector<uint32_t>{4} : std::vector<uint32_t>{1, 64})
    benchmark::RegisterBenchmark(fmt::format("decode_batch_logprobs/B:{}", batch).c_str(),
                                 [&s, batch, slots, ctx](benchmark::State& st) { decode_batch(st, s, batch, slots, ctx, false, false, 20); })
        ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMillisecond);
  for (uint32_t batch : quick ? std::vector<uint32_t>{4} : std::vector<uint32_t>{1, 16, 64})
    benchmark::RegisterBenchmark(fmt::format("decode_batch_device/B:{}", batch).c_str(),
                                 [&s, batch, slots, ctx](benchmark::State& st) { decode_batch_device(st, s, batch, slots, ctx); })
        ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMillisecond);
  for (uint32_t batch : quick ? std::vector<uint32_t>{4} : std::vector<uint32_t>{1, 4, 8, 16, 64})
    benchmark::RegisterBenchmark(fmt::format("decode_batch_ops/B:{}", batch).c_str(),
                                 [&s, batch, slots, ctx](benchmark::State& st) { decode_batch_ops(st, s, batch, slots, ctx); })
        ->UseManualTime()->Iterations(quick ? 1 : 5)->Unit(benchmark::kMillisecond);
  // The same at OpenAI's defaults (temperature 1 over the whole vocabulary) and at run's (top-k 40).
  for (const auto& [name, sampling] : {std::pair<const char*, models::SamplerOptions>{"default", {1.0f, 0, 1.0f, 0.0f, 5}},
                                       std::pair<const char*, models::SamplerOptions>{"sampled", {0.8f, 40, 0.95f, 0.0f, 5}}})
    for (uint32_t batch : quick ? std::vector<uint32_t>{4} : std::vector<uint32_t>{1, 64})
      benchmark::RegisterBenchmark(fmt::format("decode_batch_ops_{}/B:{}", name, batch).c_str(),
                                   [&s, batch, slots, ctx, sampling](benchmark::State& st) {
                                     decode_batch_ops(st, s, batch, slots, ctx, sampling);
                                   })
          ->UseManualTime()->Iterations(quick ? 1 : 5)->Unit(benchmark::kMillisecond);
  const uint32_t clients = slots;  // one slot each
  // A few clients too: the small buckets a server with a handful of users runs.
  for (uint32_t few : quick ? std::vector<uint32_t>{} : std::vector<uint32_t>{4, 8})
    benchmark::RegisterBenchmark(fmt::format("serve/clients:{}", few).c_str(),
                                 [&s, few, ctx, slots](benchmark::State& st) {
                                   serve_load(st, s, few, ctx, 8, 128, Asking::Greedy, slots);
                                 })
        ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(fmt::format("serve/clients:{}", clients).c_str(),
                               [&s, clients, ctx, quick](benchmark::State& st) {
                                 serve_load(st, s, clients, ctx, quick ? 2 : 4, quick ? 8 : 128);
                               })
      ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(fmt::format("serve_sampled/clients:{}", clients).c_str(),
                               [&s, clients, ctx, quick](benchmark::State& st) {
                                 serve_load(st, s, clients, ctx, quick ? 2 : 4, quick ? 8 : 128, Asking::Sampled);
                               })
      ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark(fmt::format("serve_default/clients:{}", clients).c_str(),
                               [&s, clients, ctx, quick](benchmark::State& st) {
                                 serve_load(st, s, clients, ctx, quick ? 2 : 4, quick ? 8 : 128, Asking::Defaults);
                               })
      ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

}  // namespace bdsl::bench
