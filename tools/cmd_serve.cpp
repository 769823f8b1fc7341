// `bitnet-dsl serve`: an OpenAI-compatible HTTP server (serve/) over one model. Flags only; the
// server, the scheduler and the endpoints live in serve/.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "models/bitnet/batch_decoder.h"
#include "models/bitnet/bitnet_model.h"
#include "models/formats/gguf.h"
#include "models/sequential_decoder.h"
#include "models/tokenizer/tokenizer.h"
#include "serve/scheduler.h"
#include "serve/server.h"
#include "serve/stop_signals.h"
#include "tools/command.h"
#include "tools/flag_number.h"

namespace bdsl::tools {
namespace {

constexpr const char* kUsage =
    "usage: bitnet-dsl serve -m MODEL.gguf [options]\n"
    "OpenAI-compatible endpoints: POST /v1/chat/completions, POST /v1/completions (\"stream\": true for\n"
    "server-sent events), GET /v1/models, GET /health, GET /metrics (Prometheus). SIGINT or SIGTERM stops it.\n"
    "  --host ADDR       address to listen on (default 127.0.0.1)\n"
    "  --port N          port (default 8080; 0: any free port, printed at start)\n"
    "  --parallel N      sequences decoded at once, sharing every decode step (default 1: the\n"
    "                    single-sequence graph); their KV caches take N x --ctx-size positions\n"
    "  --ctx-size N      context of each sequence, at most the trained one (default: the trained one)\n"
    "  --queue N         requests that may wait for a sequence slot; more get 503 (default 4 per slot)\n"
    "  --prompt-lanes N  with --parallel > 1: prompt tokens a decode step carries beside the streams\n"
    "                    it decodes; prompts of up to N tokens run in steps, longer ones in prompt\n"
    "                    blocks between steps (default 64; 0: every prompt in blocks)\n"
    "  --alias NAME      the model id clients pass (default: the file name without .gguf)\n"
    "  --device N|NAME   the Vulkan device (see `bitnet-dsl devices`)\n"
    "  --no-mmap         copy the weights into device memory even where the device could read them in\n"
    "                    place from the mapped file (a CPU device such as lavapipe)\n"
    "  --exact-norm      RMSNorm's scale at bitnet.cpp's rounding points: int8 activations and int32\n"
    "                    accumulators bitnet.cpp's bit for bit (needs f64 on the device; slower)\n";

struct ServeOptions {
  std::string model, host = "127.0.0.1", alias, device;
  int port = 8080;
  uint32_t parallel = 1, ctx_size = 0, queue = 0, prompt_lanes = bitnet::BatchOptions{}.prompt_lanes;
  bool no_mmap = false;
  bool exact_norm = false;
  bool help = false;
};

ServeOptions parse(const Args& args) {
  ServeOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (a == "-m" || a == "--model") o.model = value();
    else if (a == "--host") o.host = value();
    else if (a == "--port") o.port = flag_number<int>(a, value(), 0, 65535);
    else if (a == "--parallel" || a == "-np") o.parallel = flag_number<uint32_t>(a, value(), 1, 1024);
    else if (a == "--ctx-size" || a == "-c") o.ctx_size = flag_number<uint32_t>(a, value(), 1, 1u << 24);
    else if (a == "--queue") o.queue = flag_number<uint32_t>(a, value(), 1, 1u << 16);
    else if (a == "--prompt-lanes") o.prompt_lanes = flag_number<uint32_t>(a, value(), 0, 4096);
    else if (a == "--alias") o.alias = value();
    else if (a == "--no-mmap") o.no_mmap = true;
    else if (a == "--exact-norm") o.exact_norm = true;
    else if (a == "--device") o.device = value();
    else if (a == "-h" || a == "--help") o.help = true;
    else throw UsageError("unknown flag '" + a + "' (try --help)");
  }
  return o;
}

int run_serve(const Args& args) {
  const ServeOptions o = parse(args);
  if (o.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (o.model.empty()) throw UsageError("no model given: pass -m MODEL.gguf (`bitnet-dsl make-model tiny.gguf` makes one)");
  if (!std::filesystem::exists(o.model)) throw UsageError("model file '" + o.model + "' does not exist");
  serve::block_stop_signals();  // before the Vulkan driver starts any thread

  const auto file = models::GgufFile::open(o.model);
  auto config = models::BitNetConfig::from_gguf(file);
  if (o.ctx_size) config.context_length = std::min(o.ctx_size, config.context_length);
  const auto tokenizer = models::Tokenizer::from_gguf(file);
  rt::ContextOptions copts;
  copts.device = o.device;
  rt::Context ctx(copts);
  std::fprintf(stderr, "device: %s\n", ctx.info().summary().c_str());
  bitnet::ModelOptions mopts;
  mopts.top_k = 128;  // candidates each step draws from (on the GPU); greedy requests take the argmax
  mopts.weights_in_place = !o.no_mmap;
  mopts.exact_norm_scale = o.exact_norm;
  mopts.greedy_head = false;  // the batched step and the one-slot decoder read the F16 head itself
  bitnet::BitNetModel model(ctx, file, config, mopts);
  // One sequence: the single-sequence graph (the fastest for one). Several: one decode step
  // advances them all, each weight read once per step.
  std::unique_ptr<models::BatchDecoder> decoder;
  if (o.parallel == 1) {
    const uint64_t kv_bytes = 2ull * config.n_layers * config.context_length * config.kv_dim() * 2;
    decoder = std::make_unique<models::SequentialDecoder>(model, bitnet::BitNetModel::kMaxPrefillBlock, kv_bytes);
  } else {
    bitnet::BatchOptions bopts;
    bopts.prompt_lanes = o.prompt_lanes;
    auto batch = std::make_unique<bitnet::BitNetBatchDecoder>(ctx, model, o.parallel, bopts);
    batch->record_all_buckets();  // every bucket's kernels now: no request waits for a compile
    decoder = std::move(batch);
  }
  std::fprintf(stderr, "slots: %u of %u tokens, %.1f MiB of device memory (weights: %.1f MiB)\n", decoder->slots(),
               decoder->context_length(), double(decoder->device_bytes()) / (1 << 20),
               double(model.weight_bytes()) / (1 << 20));

  serve::Scheduler scheduler(*decoder, tokenizer, {o.queue});
  serve::ServerOptions sopts;
  sopts.host = o.host;
  sopts.port = o.port;
  sopts.model_name = o.alias.empty() ? std::filesystem::path(o.model).stem().string() : o.alias;
  sopts.candidates = decoder->top_k();
  serve::Server server(scheduler, tokenizer, sopts);
  const int port = server.bind();
  std::printf("listening on http://%s:%d (model '%s')\n", o.host.c_str(), port, sopts.model_name.c_str());
  std::fflush(stdout);
  serve::StopSignalWatcher watcher([&](int sig) {
    std::fprintf(stderr, "signal %d: stopping\n", sig);
    server.stop();
  });
  const bool ok = server.serve();
  scheduler.shutdown();
  return ok ? 0 : 1;
}

const Command serve("serve", "an OpenAI-compatible HTTP server for a BitNet GGUF model (-m MODEL)", run_serve);

}  // namespace
}  // namespace bdsl::tools
