// End to end on a model: decode at several context lengths, prompt processing, where each
// microsecond of a token and of a prefill block goes (per op, from GPU timestamps), and start-up costs.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "bench/bench_registry.h"
#include "models/bitnet/bitnet_model.h"

namespace bdsl::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct ModelState {
  models::GgufFile file;
  models::BitNetConfig config;
  std::unique_ptr<bitnet::BitNetModel> model;
  double load_seconds = 0;
  uint32_t filled = 0;  // positions of the KV cache holding real values
};

// The models a run builds: with per-dispatch GPU timestamps (the per-op tables), and without
// (what `run` executes), and without the pruned greedy head (decode_greedy then runs the full LM
// head), and with 40 candidates a step for sampling, as `run` loads it at temperature > 0 (timed
// too, for the sampled recording's per-op table).
enum class Variant { Timed, Untimed, UntimedFullHead, UntimedSampling, TimedSampling };

ModelState& model_state(BenchSession& s, Variant variant = Variant::Timed) {
  auto& slot = s.model_states[static_cast<int>(variant)];
  const bool timed = variant == Variant::Timed || variant == Variant::TimedSampling;
  auto state = std::static_pointer_cast<ModelState>(slot);
  if (!state) {
    auto file = models::GgufFile::open(s.model_path);
    auto config = models::BitNetConfig::from_gguf(file);
    state.reset(new ModelState{std::move(file), config, nullptr});
    slot = state;
    const auto t0 = Clock::now();
    bitnet::ModelOptions o;
    o.timestamps = timed;
    o.greedy_head = variant != Variant::UntimedFullHead;
    if (variant == Variant::UntimedSampling || variant == Variant::TimedSampling) o.top_k = 40;
    o.prefill_projections = s.options.prefill_projections;
    o.tensor_core_attention = s.options.tensor_core_attention;
    o.decode_tuning = s.options.decode_tuning;
    if (s.options.tokens_per_replay) o.tokens_per_replay = s.options.tokens_per_replay;
    o.exact_norm_scale = s.options.exact_norm_scale;
    state->model = std::make_unique<bitnet::BitNetModel>(*s.ctx, state->file, state->config, o);
    state->load_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    // The draw over the vocabulary (top_k 0) is recorded at its first use: here, so that its
    // kernels are listed for the per-op rows and no timed step compiles them.
    if (o.top_k) state->model->prepare_vocabulary_draw();
  }
  return *state;
}

// Decodes real tokens until the cache holds `positions` of them.
void fill_cache(ModelState& m, uint32_t positions) {
  for (; m.filled < positions; ++m.filled) m.model->step(int32_t(m.filled % m.config.vocab_size), m.filled);
}

// Bytes one call of each kernel reads (weights, cache, activations), by pipeline name.
std::map<std::string, double> bytes_per_call(const ModelState& m, uint32_t pos) {
  const auto& c = m.config;
  const auto& p = m.model->pipelines();
  const double q = p.dims.q_width(), kv = p.dims.kv_width(), dim = c.dim, ffn = c.ffn_dim;
  std::map<std::string, double> bytes = {{p.embedding.name(), dim * 2},
          {p.qkv.name(), (q + 2 * kv) * dim / 4 + dim * 8},
          {p.attention.name(), double(pos + 1) * kv * 2 * 2 + q * 4},
          {p.attn_output.name(), dim * q / 4 + q * 4 + dim * 8},
          {p.gate_up.name(), 2 * ffn * dim / 4 + dim * 4},
          {p.ffn_down.name(), dim * ffn / 4 + ffn * 4 + dim * 8},
          {p.output_norm.name(), dim * 8},
          {p.lm_head.name(), double(c.vocab_size) * dim * 2},
          {p.argmax_partial.name(), c.vocab_size * 4.0}};
  if (p.top_k_partial) bytes[p.top_k_partial->name()] = c.vocab_size * 4.0;
  // The greedy head's bounds pass: the int8 shadow and two bounds a row (models/bitnet/greedy_head.h).
  if (p.lm_head_bounds) bytes[p.lm_head_bounds->name()] = double(c.vocab_size) * (dim + 8);
  return bytes;
}

double token_bytes(const ModelState& m, uint32_t pos) {
  const auto bytes = bytes_per_call(m, pos);
  double total = 0;
  const auto names = m.model->operation_names();
  for (const auto& n : names)
    if (auto it = bytes.find(n); it != bytes.end()) total += it->second;
  return total;
}

// Decode as `bitnet-dsl run` does it: no timestamps in the recording, wall time per token
// (submit, GPU, wait, read back). Timestamps around every dispatch cost time themselves.
void decode_untimed(benchmark::State& st, BenchSession& s, uint32_t ctx_len, Variant variant) {
  auto& m = model_state(s, variant);
  ctx_len = std::min(ctx_len, m.config.context_length);
  fill_cache(m, ctx_len - 1);
  double wall = 0;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    m.model->step(1, ctx_len - 1);
    const double w = std::chrono::duration<double>(Clock::now() - t0).count();
    st.SetIterationTime(w);
    wall += w;
  }
  st.counters["tokens_per_s"] = double(st.iterations()) / wall;
  st.counters["dispatches"] = m.model->stats().dispatches;
  st.counters["steps"] = m.model->stats().steps;
}

// Greedy generation as `bitnet-dsl run` does it (Generator -> decode_greedy): the device feeds
// each argmax to the next step and the host keeps replays queued. An iteration is a run of
// kGreedyRun steps ending at position ctx - 1; the time reported is per token.
constexpr uint32_t kGreedyRun = 16;
void decode_greedy(benchmark::State& st, BenchSession& s, uint32_t ctx_len, Variant variant) {
  auto& m = model_state(s, variant);
  ctx_len = std::min(ctx_len, m.config.context_length);
  const uint32_t run = std::min(kGreedyRun, ctx_len), first = ctx_len - run;
  fill_cache(m, first);
  double wall = 0;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    m.model->decode_greedy(1, first, run, [](int32_t) { return true; });
    const double w = std::chrono::duration<double>(Clock::now() - t0).count();
    st.SetIterationTime(w / run);
    wall += w;
  }
  st.counters["tokens_per_s"] = double(st.iterations()) * run / wall;
  st.counters["steps"] = m.model->stats().steps;
}

// Sampled generation as `run` does it at its defaults (temperature 0.8, top-k 40, top-p 0.95):
// decode_sampled, the device drawing each token from the step's candidates and feeding it on.
// An iteration is a run of kGreedyRun steps ending at position ctx - 1; time per token.
// `run`'s sampling defaults, with a fixed seed (run's is random unless given).
const models::SamplerOptions kRunDefaults{0.8f, 40, 0.95f, 0.0f, 1234};
// The same with top_k 0: top-p over the whole vocabulary (the full head, every logit drawn from).
const models::SamplerOptions kVocabularyDraw{0.8f, 0, 0.95f, 0.0f, 1234};
// The defaults with llama.cpp's former default repeat penalty (1.1 over the last 64 tokens): the
// full head's logits penalized, then the top-k draw (bitnet_model.h, decode_penalized).
const models::SamplerOptions kRepeatPenalty{0.8f, 40, 0.95f, 0.0f, 1234, 1.1f, 64};

void decode_sampled(benchmark::State& st, BenchSession& s, uint32_t ctx_len, const models::SamplerOptions& sampling) {
  auto& m = model_state(s, Variant::UntimedSampling);
  ctx_len = std::min(ctx_len, m.config.context_length);
  const uint32_t run = std::min(kGreedyRun, ctx_len), first = ctx_len - run;
  fill_cache(m, first);
  double wall = 0;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    m.model->decode_sampled(1, first, run, sampling, [](int32_t) { return true; });
    const double w = std::chrono::duration<double>(Clock::now() - t0).count();
    st.SetIterationTime(w / run);
    wall += w;
  }
  st.counters["tokens_per_s"] = double(st.iterations()) * run / wall;
  st.counters["steps"] = m.model->stats().steps;
  if (!models::draws_over_vocabulary(sampling) && !models::penalizes(sampling))
    st.counters["candidate_rows"] = m.model->sampled_candidate_rows();  // the pruned head's list, last token
}

void decode(benchmark::State& st, BenchSession& s, uint32_t ctx_len) {
  auto& m = model_state(s);
  ctx_len = std::min(ctx_len, m.config.context_length);
  fill_cache(m, ctx_len - 1);
  double wall = 0, gpu = 0;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    m.model->step(1, ctx_len - 1);
    const double w = std::chrono::duration<double>(Clock::now() - t0).count();
    const double span = m.model->gpu_span_ns();
    st.SetIterationTime(span * 1e-9);
    wall += w;
    gpu += span * 1e-9;
  }
  const double n = double(st.iterations());
  const double bytes = token_bytes(m, ctx_len - 1);
  const auto stats = m.model->stats();
  st.counters["tokens_per_s"] = n / wall;
  st.counters["gpu_tokens_per_s"] = n / gpu;
  st.counters["dispatches"] = stats.dispatches;
  st.counters["steps"] = stats.steps;
  st.counters["MB_per_token"] = bytes / 1e6;
  st.counters["roofline_us"] = bytes / s.peak_read_gbps / 1e3;
  st.counters["frac_of_roofline"] = (bytes / s.peak_read_gbps / 1e9) / (gpu / n);
}

// The GPU time of every dispatch of `op` in one replay (ns), and how many there were.
double op_ns(const std::vector<std::string>& names, const std::vector<double>& ns, const std::string& op, uint32_t& calls) {
  double t = 0;
  calls = 0;
  for (size_t i = 0; i < ns.size(); ++i)
    if (names[i] == op) t += ns[i], ++calls;
  return t;
}

// Where a token's time goes: each kernel's GPU time per token, summed over its calls, in the
// recording step() replays, or a kernel only decode_greedy's (the pruned LM head) or decode_sampled's
// (the pruned head's candidate list and draw) or its draw over the vocabulary (top_k 0) runs,
// timed over one such step.
enum class Recording { Step, Greedy, Sampled, Vocabulary };

void per_op(benchmark::State& st, BenchSession& s, const std::string& op, uint32_t pos, Recording rec = Recording::Step) {
  const bool sampling = rec == Recording::Sampled || rec == Recording::Vocabulary;
  auto& m = model_state(s, sampling ? Variant::TimedSampling : Variant::Timed);
  fill_cache(m, pos);
  const auto names = rec == Recording::Greedy       ? m.model->greedy_operation_names()
                     : rec == Recording::Sampled    ? m.model->sampled_operation_names()
                     : rec == Recording::Vocabulary ? m.model->vocabulary_operation_names()
                                                    : m.model->operation_names();
  double total = 0;
  uint32_t calls = 0;
  for (auto _ : st) {
    if (rec == Recording::Greedy)
      m.model->decode_greedy(1, pos, 1, [](int32_t) { return true; });
    else if (sampling)
      m.model->decode_sampled(1, pos, 1, rec == Recording::Sampled ? kRunDefaults : kVocabularyDraw, [](int32_t) { return true; });
    else
      m.model->step(1, pos);
    const auto ns = rec == Recording::Greedy       ? m.model->greedy_timestamps_ns()
                    : rec == Recording::Sampled    ? m.model->sampled_timestamps_ns()
                    : rec == Recording::Vocabulary ? m.model->vocabulary_timestamps_ns()
                                                   : m.model->timestamps_ns();
    const double t = op_ns(names, ns, op, calls);
    st.SetIterationTime(t * 1e-9);
    total += t;
  }
  const double per_token_ns = total / double(st.iterations());
  st.counters["calls"] = calls;
  st.counters["us_per_call"] = per_token_ns / 1e3 / std::max(calls, 1u);
  // How the bounds prune on this model's weights.
  if (rec == Recording::Greedy) st.counters["candidate_rows"] = m.model->greedy_candidate_rows();
  if (rec == Recording::Sampled) st.counters["candidate_rows"] = m.model->sampled_candidate_rows();
  const auto bytes = bytes_per_call(m, pos);
  if (auto it = bytes.find(op); it != bytes.end()) {
    st.counters["GB_per_s"] = it->second * calls / per_token_ns;
    st.counters["frac_of_peak"] = it->second * calls / per_token_ns / s.peak_read_gbps;
  }
}

std::vector<int32_t> prompt_of(const ModelState& m, uint32_t n) {
  std::vector<int32_t> prompt(std::min(n, m.config.context_length));
  for (uint32_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919) % m.config.vocab_size);
  return prompt;
}

void prefill(benchmark::State& st, BenchSession& s, uint32_t n) {
  auto& m = model_state(s);
  const auto prompt = prompt_of(m, n);
  m.model->prefill(prompt, 0);  // records the block's graph and builds its pipelines once
  double seconds = 0, gpu = 0;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    m.model->prefill(prompt, 0);
    const double s_wall = std::chrono::duration<double>(Clock::now() - t0).count();
    st.SetIterationTime(s_wall);
    seconds += s_wall;
    gpu += m.model->prefill_gpu_span_ns() * 1e-9;
  }
  m.filled = uint32_t(prompt.size());
  const double tokens = double(prompt.size()) * double(st.iterations());
  st.counters["tokens_per_s"] = tokens / seconds;
  // The last block's graph only: a prompt of one block.
  if (gpu > 0 && n <= bitnet::BitNetModel::kMaxPrefillBlock) st.counters["gpu_tokens_per_s"] = tokens / gpu;
  st.counters["batched"] = 1;  // matrix-matrix projections over the whole block
}

// A prompt scored as a server's echo with logprobs scores it (prefill_scored: each row's next
// token's log-probability and `top` alternatives on the device), or (top < 0) every row's logits
// read back as perplexity reads them (prefill_all_logits; what scoring on the host started from).
void prompt_scoring(benchmark::State& st, BenchSession& s, uint32_t n, int32_t top) {
  auto& m = model_state(s);
  const auto prompt = prompt_of(m, n);
  std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
  next.push_back(-1);
  size_t scored = 0;
  auto run = [&] {
    if (top < 0) {
      m.model->prefill_all_logits(prompt, 0, [&](uint32_t, std::span<const float> l) { scored += l.empty() ? 0 : 1; });
    } else {
      m.model->prefill_scored(prompt, 0, {next, uint32_t(top), [&](uint32_t, const models::TokenLogprobs&) { ++scored; }});
    }
  };
  run();  // records the graphs and builds the pipelines once
  double seconds = 0;
  for (auto _ : st) {
    const auto t0 = Clock::now();
    run();
    const double s_wall = std::chrono::duration<double>(Clock::now() - t0).count();
    st.SetIterationTime(s_wall);
    seconds += s_wall;
  }
  m.filled = uint32_t(prompt.size());
  st.counters["tokens_per_s"] = double(prompt.size()) * double(st.iterations()) / seconds;
  st.counters["rows"] = double(scored) / double(st.iterations() + 1);
}

// Where a prefill block's time goes: each kernel's GPU time per block, summed over its calls.
void prefill_per_op(benchmark::State& st, BenchSession& s, const std::string& op, uint32_t n) {
  auto& m = model_state(s);
  const auto prompt = prompt_of(m, n);
  double total = 0, span = 0;
  uint32_t calls = 0;
  for (auto _ : st) {
    m.model->prefill(prompt, 0);
    const double t = op_ns(m.model->prefill_operation_names(), m.model->prefill_timestamps_ns(), op, calls);
    st.SetIterationTime(t * 1e-9);
    total += t;
    span += m.model->prefill_gpu_span_ns();
  }
  m.filled = uint32_t(prompt.size());
  const double per_prefill_ns = total / double(st.iterations());
  st.counters["calls"] = calls;
  st.counters["us_per_call"] = per_prefill_ns / 1e3 / std::max(calls, 1u);
  st.counters["us_per_prefill"] = per_prefill_ns / 1e3;
  if (span > 0) st.counters["frac_of_prefill"] = total / span;
}

void model_load(benchmark::State& st, BenchSession& s) {
  auto& m = model_state(s);
  for (auto _ : st) st.SetIterationTime(m.load_seconds);
  st.counters["MB"] = double(m.model->weight_bytes()) / 1e6;
  st.counters["GB_per_s"] = double(m.model->weight_bytes()) / m.load_seconds / 1e9;
  // What the model holds on the device, by class (as `run` prints it), in MiB.
  const bitnet::DeviceMemory d = m.model->device_memory();
  st.counters["device_MiB"] = double(d.total()) / (1 << 20);
  st.counters["weights_MiB"] = double(d.weights) / (1 << 20);
  st.counters["shadow_MiB"] = double(d.head_shadow) / (1 << 20);
  st.counters["kv_MiB"] = double(d.kv_cache) / (1 << 20);
  st.counters["activations_MiB"] = double(d.activations) / (1 << 20);
}

}  // namespace

void register_model_benchmarks(BenchSession& s) {
  const bool quick = s.options.quick;
  const int iters = quick ? 3 : 50;
  for (uint32_t ctx : quick ? std::vector<uint32_t>{16, 64} : std::vector<uint32_t>{128, 512, 2048})
    benchmark::RegisterBenchmark(fmt::format("decode/ctx:{}", ctx).c_str(),
                                 [&s, ctx](benchmark::State& st) { decode(st, s, ctx); })
        ->UseManualTime()->Iterations(iters)->Unit(benchmark::kMicrosecond);
  for (uint32_t ctx : quick ? std::vector<uint32_t>{64} : std::vector<uint32_t>{128, 512, 2048})
    benchmark::RegisterBenchmark(fmt::format("decode_untimed/ctx:{}", ctx).c_str(),
                                 [&s, ctx](benchmark::State& st) { decode_untimed(st, s, ctx, Variant::Untimed); })
        ->UseManualTime()->Iterations(quick ? 3 : 200)->Unit(benchmark::kMicrosecond);
  for (uint32_t ctx : quick ? std::vector<uint32_t>{64} : std::vector<uint32_t>{128, 512, 2048})
    for (Variant v : {Variant::Untimed, Variant::UntimedFullHead})
      benchmark::RegisterBenchmark(fmt::format("decode_greedy{}/ctx:{}", v == Variant::Untimed ? "" : "_full_head", ctx).c_str(),
                                   [&s, ctx, v](benchmark::State& st) { decode_greedy(st, s, ctx, v); })
          ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
  for (uint32_t ctx : quick ? std::vector<uint32_t>{64} : std::vector<uint32_t>{128, 512, 2048})
    benchmark::RegisterBenchmark(fmt::format("decode_sampled/ctx:{}", ctx).c_str(),
                                 [&s, ctx](benchmark::State& st) { decode_sampled(st, s, ctx, kRunDefaults); })
        ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
  for (uint32_t ctx : quick ? std::vector<uint32_t>{64} : std::vector<uint32_t>{512, 2048})
    benchmark::RegisterBenchmark(fmt::format("decode_sampled_vocabulary/ctx:{}", ctx).c_str(),
                                 [&s, ctx](benchmark::State& st) { decode_sampled(st, s, ctx, kVocabularyDraw); })
        ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
  for (uint32_t ctx : quick ? std::vector<uint32_t>{64} : std::vector<uint32_t>{512})
    benchmark::RegisterBenchmark(fmt::format("decode_sampled_repeat_penalty/ctx:{}", ctx).c_str(),
                                 [&s, ctx](benchmark::State& st) { decode_sampled(st, s, ctx, kRepeatPenalty); })
        ->UseManualTime()->Iterations(quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
  // 4,096: the 2B-4T context whole, its last blocks attending over 3,584 positions and more.
  for (uint32_t n : quick ? std::vector<uint32_t>{16} : std::vector<uint32_t>{128, 512, 2048, 4096})
    benchmark::RegisterBenchmark(fmt::format("prefill/tokens:{}", n).c_str(),
                                 [&s, n](benchmark::State& st) { prefill(st, s, n); })
        ->UseManualTime()->Iterations(quick ? 1 : 3)->Unit(benchmark::kMillisecond);
  for (uint32_t n : quick ? std::vector<uint32_t>{16} : std::vector<uint32_t>{512})
    for (int32_t top : {-1, 0, 5})
      benchmark::RegisterBenchmark((top < 0 ? fmt::format("prompt_logits/tokens:{}", n)
                                            : fmt::format("prompt_scoring/tokens:{}/top:{}", n, top)).c_str(),
                                   [&s, n, top](benchmark::State& st) { prompt_scoring(st, s, n, top); })
          ->UseManualTime()->Iterations(quick ? 1 : 3)->Unit(benchmark::kMillisecond);
  // Per-op table at a fixed position (512, or 32 with --quick): the decode graph's kernels, then
  // each other recording's own (the greedy one's pruned head and argmax; the sampled one's
  // candidate list and draw and the draw over the vocabulary's radix passes, on a model with
  // candidates), each name once.
  const uint32_t pos = quick ? 32 : 511;
  auto& m = model_state(s);
  std::vector<std::string> seen;
  auto per_op_family = [&](const std::vector<std::string>& names, Recording recording) {
    for (const auto& name : names) {
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(name);
      benchmark::RegisterBenchmark(fmt::format("op/{}", name).c_str(),
                                   [&s, name, pos, recording](benchmark::State& st) { per_op(st, s, name, pos, recording); })
          ->UseManualTime()->Iterations(iters)->Unit(benchmark::kMicrosecond);
    }
  };
  per_op_family(m.model->operation_names(), Recording::Step);
  per_op_family(m.model->greedy_operation_names(), Recording::Greedy);
  per_op_family(model_state(s, Variant::TimedSampling).model->sampled_operation_names(), Recording::Sampled);
  per_op_family(model_state(s, Variant::TimedSampling).model->vocabulary_operation_names(), Recording::Vocabulary);
  // Per-op table of one prefill block (--prefill-block, 16 with --quick); one prefill records its graph.
  const uint32_t block = quick ? 16 : s.options.prefill_block;
  m.model->prefill(prompt_of(m, block), 0);
  std::vector<std::string> prefill_seen;
  for (const auto& name : m.model->prefill_operation_names()) {
    if (std::find(prefill_seen.begin(), prefill_seen.end(), name) != prefill_seen.end()) continue;
    prefill_seen.push_back(name);
    benchmark::RegisterBenchmark(fmt::format("prefill_op/{}", name).c_str(),
                                 [&s, name, block](benchmark::State& st) { prefill_per_op(st, s, name, block); })
        ->UseManualTime()->Iterations(quick ? 1 : 10)->Unit(benchmark::kMicrosecond);
  }
  // Attention's time grows with the position: its per-op measure at a short and the longest context too.
  if (!quick)
    for (uint32_t at : {100u, m.config.context_length - 1}) {
      const std::string name = m.model->pipelines().attention.name();
      benchmark::RegisterBenchmark(fmt::format("op/{}/pos:{}", name, at).c_str(),
                                   [&s, name, at](benchmark::State& st) { per_op(st, s, name, at); })
          ->UseManualTime()->Iterations(iters)->Unit(benchmark::kMicrosecond);
    }
  benchmark::RegisterBenchmark("startup/model_load", [&s](benchmark::State& st) { model_load(st, s); })
      ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

}  // namespace bdsl::bench
