// `bitnet-dsl run`: text (or token ids) in, a streamed continuation out, speed figures on stderr.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>

#include "golden/npy.h"
#include "models/bitnet/bitnet_model.h"
#include "models/formats/gguf.h"
#include "models/generator.h"
#include "models/tokenizer/chat_template.h"
#include "models/tokenizer/token_stream.h"
#include "models/tokenizer/tokenizer.h"
#include "tools/command.h"
#include "tools/run_options.h"

namespace bdsl::tools {
namespace {

constexpr const char* kWhereToGetTheModel =
    "no model given: pass -m MODEL.gguf (Microsoft's BitNet b1.58 2B-4T is ggml-model-i2_s.gguf in the Hugging "
    "Face repository microsoft/bitnet-b1.58-2B-4T-gguf; `bitnet-dsl make-model tiny.gguf` makes a synthetic one)";

void progress_bar(uint64_t done, uint64_t total) {
  if (!isatty(STDERR_FILENO)) return;
  std::fprintf(stderr, "\rloading weights: %3d%% (%llu / %llu MiB)", int(100 * done / std::max<uint64_t>(total, 1)),
               (unsigned long long)(done >> 20), (unsigned long long)(total >> 20));
  if (done == total) std::fprintf(stderr, "\n");
}

// One line: how long the model took to load (weights, LM-head shadow, pipelines, recording: all
// of it) and what it holds on the device, by class.
void print_memory(const bitnet::BitNetModel& model, double seconds) {
  const bitnet::DeviceMemory m = model.device_memory();
  auto mib = [](uint64_t b) { return (unsigned long long)((b + (1 << 19)) >> 20); };
  // Weights read where they lie in the mapped file (a CPU device) hold no memory of their own.
  const std::string in_place = m.weights_in_place == 0         ? ""
                               : m.weights_in_place == m.weights ? " read in place from the file"
                                                                 : fmt::format(", {} of them read in place", mib(m.weights_in_place));
  // No shadow where it does not pay (bitnet::greedy_head_pays: a CPU device).
  const std::string shadow = m.head_shadow ? fmt::format("lm-head shadow {}", mib(m.head_shadow)) : "no lm-head shadow";
  std::fprintf(stderr, "model: %llu MiB loaded in %.2f s (%.2f GB/s); device memory %llu MiB (weights %llu%s, %s, "
               "KV %llu for %u positions, activations %llu)\n",
               mib(m.weights), seconds, double(m.weights) / std::max(seconds, 1e-9) / 1e9, mib(m.total()), mib(m.weights),
               in_place.c_str(), shadow.c_str(), mib(m.kv_cache), model.context_length(), mib(m.activations));
}

// Ctrl-C: the first stops the generation in progress (its statistics still print; `-i` goes back
// to the prompt, where the next one ends the chat), a second one during the same generation exits
// at once. Without SA_RESTART, so that one at the prompt ends the read.
std::atomic<int> g_interrupts{0};
void on_interrupt(int) {
  if (g_interrupts.fetch_add(1) >= 1) _exit(130);
}
void catch_interrupts() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
}
bool interrupted() { return g_interrupts.load() > 0; }

void print_speed(const models::GenerationResult& r) {
  const char* reason = interrupted() && r.reason == models::StopReason::Callback ? "interrupted (Ctrl-C)" : models::to_string(r.reason);
  // The prompt pass runs all but the last prompt token (the generation decodes it): its rate is theirs.
  const std::string pass = r.prompt_pass_tokens == r.prompt_tokens ? "" : fmt::format(" ({} in the prompt pass)", r.prompt_pass_tokens);
  std::fprintf(stderr, "\nprompt: %u tokens%s in %.3f s (%.1f tokens/s) | generation: %zu tokens in %.3f s (%.1f tokens/s) | %s\n",
               r.prompt_tokens, pass.c_str(), r.prompt_seconds, r.prompt_pass_tokens / std::max(r.prompt_seconds, 1e-9),
               r.tokens.size(), r.generate_seconds, r.tokens.size() / std::max(r.generate_seconds, 1e-9), reason);
}

void write_logits(const std::string& path, const std::vector<std::vector<float>>& rows) {
  std::vector<float> all;
  for (const auto& r : rows) all.insert(all.end(), r.begin(), r.end());
  const uint64_t cols = rows.empty() ? 0 : rows[0].size();
  golden::write_npy(path, std::span<const float>(all), {rows.size(), cols});
}

int chat_loop(models::DecoderModel& model, const models::Tokenizer& tok, models::GenerateOptions gen) {
  models::Generator generator(model);
  std::vector<models::ChatMessage> history;
  std::vector<int32_t> in_cache;  // the tokens the KV cache holds, in order
  std::string line;
  std::fprintf(stderr, "interactive chat: an empty line, end of input or Ctrl-C quits\n");
  while (g_interrupts = 0, std::fprintf(stderr, "> "), std::getline(std::cin, line) && !line.empty()) {
    history.push_back({"user", line});
    const auto ids = tok.encode(tok.chat_prompt(history, true), false);
    // Feed only what the cache does not hold yet: the longest common prefix stays.
    const auto [kept, unused] = std::mismatch(in_cache.begin(), in_cache.end(), ids.begin(), ids.end());
    in_cache.erase(kept, in_cache.end());
    generator.rewind(uint32_t(in_cache.size()));
    std::vector<int32_t> fresh(ids.begin() + int64_t(in_cache.size()), ids.end());
    models::TokenStreamDecoder stream(tok);
    std::string reply;
    const auto r = generator.generate(fresh, gen, [&](int32_t id) {
      if (tok.is_end_of_generation(id)) return true;
      const std::string text = stream.push(id);
      reply += text;
      std::fputs(text.c_str(), stdout);
      std::fflush(stdout);
      return !interrupted();
    });
    in_cache.insert(in_cache.end(), fresh.begin(), fresh.end());
    in_cache.insert(in_cache.end(), r.tokens.begin(), r.tokens.end());
    history.push_back({"assistant", reply});
    std::fputs((stream.flush() + "\n").c_str(), stdout);
    std::fflush(stdout);
    print_speed(r);
    if (r.reason == models::StopReason::ContextFull) {
      std::fprintf(stderr, "the context is full (%u tokens): ending the chat\n", model.context_length());
      break;
    }
  }
  return 0;
}

int run_run(const Args& args) {
  RunOptions o = parse_run_options(args);
  if (o.help) {
    std::fputs(kRunUsage, stdout);
    return 0;
  }
  if (o.version) {
    std::printf("%s\n", version_line());
    return 0;
  }
  if (o.list_devices) {
    for (const auto& d : rt::Context::list_devices()) std::printf("%s\n", d.summary().c_str());
    return 0;
  }
  if (o.model.empty()) throw UsageError(kWhereToGetTheModel);
  if (!std::filesystem::exists(o.model)) throw UsageError("model file '" + o.model + "' does not exist");
  if (!o.interactive && o.prompt.empty() && !o.has_prompt_ids) throw UsageError("nothing to continue: give -p TEXT or --prompt-ids");
  const auto file = models::GgufFile::open(o.model);
  auto config = models::BitNetConfig::from_gguf(file);
  if (o.ctx_size > config.context_length)
    std::fprintf(stderr, "--ctx-size %u is past the model's trained context: using %u\n", o.ctx_size, config.context_length);
  if (o.ctx_size) config.context_length = std::min(o.ctx_size, config.context_length);
  const bool need_text = !o.has_prompt_ids || !o.print_ids || o.interactive;
  std::optional<models::Tokenizer> tok;
  if (need_text) tok.emplace(models::Tokenizer::from_gguf(file));

  if (!o.seed_given) o.sampling.seed = std::random_device{}();
  if (o.sampling.temperature > 0 && !o.seed_given) std::fprintf(stderr, "seed: %llu\n", (unsigned long long)o.sampling.seed);
  rt::ContextOptions copts;
  copts.device = o.device;
  rt::Context ctx(copts);
  std::fprintf(stderr, "device: %s\n", ctx.info().summary().c_str());
  bitnet::ModelOptions mopts;
  mopts.top_k = o.sampling.temperature == 0 ? 0 : (o.sampling.top_k == 0 ? 128 : o.sampling.top_k);
  mopts.dump = !o.dump_layers.empty();
  mopts.weights_in_place = !o.no_mmap;
  mopts.exact_norm_scale = o.exact_norm;
  mopts.greedy_head = bitnet::greedy_head_pays(ctx.info());
  const auto t0 = std::chrono::steady_clock::now();
  bitnet::BitNetModel model(ctx, file, config, mopts, progress_bar);
  if (models::draws_over_vocabulary(o.sampling)) model.prepare_vocabulary_draw();  // counted in the load
  print_memory(model, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  catch_interrupts();
  models::GenerateOptions gen;
  gen.max_new_tokens = o.n_predict;
  gen.sampling = o.sampling;
  if (gen.sampling.repeat_last_n == kWholeContext) {
    gen.sampling.repeat_last_n = model.context_length();
    if (gen.sampling.repeat_last_n > models::kMaxRepeatLastN)
      throw UsageError(fmt::format("--repeat-last-n -1 is the whole context, {} positions, but the window holds at most {}: "
                                   "give a smaller -c or --repeat-last-n",
                                   model.context_length(), models::kMaxRepeatLastN));
  }
  if (tok) gen.is_end = [&](int32_t id) { return tok->is_end_of_generation(id); };
  if (o.interactive) return chat_loop(model, *tok, gen);

  std::vector<int32_t> prompt = o.prompt_ids;
  if (!o.has_prompt_ids)
    prompt = o.chat ? tok->encode(tok->chat_prompt({{"user", o.prompt}}, true), false) : tok->encode(o.prompt, true);
  for (int32_t id : prompt)
    if (uint32_t(id) >= config.vocab_size)
      throw UsageError("--prompt-ids: token id " + std::to_string(id) + " is outside the vocabulary of " +
                       std::to_string(config.vocab_size));
  gen.keep_logits = !o.dump_logits.empty();
  std::map<std::string, std::vector<float>> layers;
  if (mopts.dump)
    gen.after_prompt_token = [&](uint32_t) {
      for (auto& [name, v] : model.dumps()) layers[name].insert(layers[name].end(), v.begin(), v.end());
    };

  models::Generator generator(model);
  std::optional<models::TokenStreamDecoder> stream;
  if (tok && !o.print_ids) stream.emplace(*tok);
  std::string last;  // the text last written, so that the output ends with a newline
  auto write = [&](const std::string& text) {
    if (text.empty()) return;
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    last = text;
  };
  const auto result = generator.generate(prompt, gen, [&](int32_t id) {
    if (stream) write(stream->push(id));
    return !interrupted();
  });
  if (stream) write(stream->flush());
  if (stream && (last.empty() || last.back() != '\n')) write("\n");
  if (o.print_ids) {
    for (size_t i = 0; i < result.tokens.size(); ++i) std::printf("%s%d", i ? "," : "", result.tokens[i]);
    std::printf("\n");
  }
  print_speed(result);
  std::fprintf(stderr, "one token: %u dispatches, %u barrier-separated steps, one submit\n", model.stats().dispatches,
               model.stats().steps);
  if (result.reason == models::StopReason::ContextFull)
    std::fprintf(stderr, "stopped: the context of %u tokens is full\n", config.context_length);
  if (!o.dump_logits.empty()) write_logits(o.dump_logits, result.logits);
  if (!o.dump_layers.empty()) {
    // K (after RoPE) and V as the F16 cache holds them; the norms the graph fuses into the
    // projections never exist as tensors (see `bitnet-dsl validate`).
    for (uint32_t l = 0; l < config.n_layers; ++l) {
      auto [k, v] = model.kv_cache(l, uint32_t(prompt.size()));
      layers["Kcur-" + std::to_string(l)] = std::move(k);
      layers["Vcur-" + std::to_string(l)] = std::move(v);
    }
    std::filesystem::create_directories(o.dump_layers);
    for (const auto& [name, v] : layers)
      golden::write_npy(std::filesystem::path(o.dump_layers) / (name + ".npy"), std::span<const float>(v),
                        {prompt.size(), v.size() / prompt.size()});
  }
  return interrupted() ? 130 : 0;  // as a shell reports Ctrl-C, once the statistics are out
}

const Command run("run", "generate text with a BitNet GGUF model on the GPU (-m MODEL -p TEXT)", run_run);

}  // namespace
}  // namespace bdsl::tools
