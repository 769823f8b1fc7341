// `bitnet-dsl perplexity -m MODEL -f TEXT [--ctx N] [--kl-divergence-base FILE] [--kl-divergence]`:
// llama-perplexity's measure on our model (models/perplexity.h): flags parsed here, the work there.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "models/bitnet/bitnet_model.h"
#include "models/formats/gguf.h"
#include "models/kl_base_file.h"
#include "models/perplexity.h"
#include "models/tokenizer/tokenizer.h"
#include "tools/command.h"
#include "tools/flag_number.h"

namespace bdsl::tools {
namespace {

constexpr const char* kUsage =
    "usage: bitnet-dsl perplexity -m MODEL.gguf -f TEXT [--ctx N] [--kl-divergence-base FILE [--kl-divergence]]\n"
    "                             [--device N|NAME] [--exact-norm]\n"
    "Perplexity of the model over a text, as llama-perplexity computes it: the text's tokens in\n"
    "non-overlapping windows of N tokens (default 512), each starting with BOS and run as one batch;\n"
    "the second half of each window is scored. Prints the running estimate per window and\n"
    "  Final estimate: PPL = X +/- error\n"
    "  --kl-divergence-base FILE    also write every scored position's log-probabilities to FILE\n"
    "  --kl-divergence              instead compare with FILE (written by another model, build or device):\n"
    "                               KL divergence (mean, max, percentiles) and top-1 agreement; -f may be\n"
    "                               left out (the tokens come from FILE)\n"
    "  -c, --ctx N                  tokens a window (at most the model's context)\n"
    "  --exact-norm                 RMSNorm's scale at bitnet.cpp's rounding points (needs f64; slower)\n";

std::string read_text(const std::string& path) {
  if (!std::filesystem::exists(path)) throw UsageError("text file '" + path + "' does not exist");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read the text file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) throw UsageError("text file '" + path + "' is empty: nothing to score");
  return ss.str();
}

void progress(uint32_t done, uint32_t total) {
  if (!isatty(STDERR_FILENO)) return;
  const int width = 30, filled = int(width * uint64_t{done} / std::max(total, 1u));
  std::fprintf(stderr, "\rperplexity: window %u / %u [%s%s]", done, total, std::string(size_t(filled), '=').c_str(),
               std::string(size_t(width - filled), ' ').c_str());
  if (done == total) std::fprintf(stderr, "\n");
}

int run_perplexity(const Args& args) {
  std::string model_path, text_path, base_path, device;
  uint32_t context = 512;
  bool compare = false, context_given = false, exact_norm = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (a == "-m" || a == "--model") model_path = value();
    else if (a == "-f" || a == "--file") text_path = value();
    else if (a == "-c" || a == "--ctx" || a == "--ctx-size") {
      context = flag_number<uint32_t>(a, value(), 2u, 1u << 20);
      context_given = true;
    }
    else if (a == "--kl-divergence-base") base_path = value();
    else if (a == "--kl-divergence") compare = true;
    else if (a == "--device") device = value();
    else if (a == "--exact-norm") exact_norm = true;
    else if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    } else throw UsageError("unknown argument '" + a + "' (try --help)");
  }
  if (model_path.empty()) throw UsageError("missing -m MODEL.gguf");
  if (!std::filesystem::exists(model_path)) throw UsageError("model file '" + model_path + "' does not exist");
  if (compare && base_path.empty()) throw UsageError("--kl-divergence needs --kl-divergence-base FILE (the base to compare with)");
  if (!compare && text_path.empty()) throw UsageError("missing -f TEXT (the text to score)");
  const std::string text = text_path.empty() ? std::string() : read_text(text_path);  // before the slow part

  const auto file = models::GgufFile::open(model_path);
  const auto config = models::BitNetConfig::from_gguf(file);
  std::optional<models::KlBaseReader> base;
  if (compare) {
    try {
      base.emplace(base_path);
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
    if (context_given && context != base->header().context)
      throw UsageError("--ctx " + std::to_string(context) + ", but '" + base_path + "' was written with --ctx " +
                       std::to_string(base->header().context) + " (leave --ctx out to take the base's)");
    context = base->header().context;
  }
  const auto tok = models::Tokenizer::from_gguf(file);
  const std::vector<int32_t> tokens = text.empty() ? base->tokens() : tok.encode(text, true, false);
  try {  // every check before the model is loaded
    models::check_perplexity_inputs(tokens, context, tok.bos_id(), config.context_length, config.vocab_size,
                                    base ? &*base : nullptr);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(e.what()) + (base ? " ('" + base_path + "', " + model_path + ")" : ""));
  }

  rt::ContextOptions copts;
  copts.device = device;
  rt::Context ctx(copts);
  std::fprintf(stderr, "device: %s\n", ctx.info().summary().c_str());
  bitnet::ModelOptions mopts;
  mopts.greedy_head = false;  // every logit is computed: no decode step needs the pruned head
  mopts.exact_norm_scale = exact_norm;
  bitnet::BitNetModel model(ctx, file, config, mopts);
  models::PerplexityOptions o;
  o.context = context;
  o.bos = tok.bos_id();
  o.progress = progress;
  o.compare = base ? &*base : nullptr;
  std::optional<models::KlBaseWriter> save;
  if (!compare && !base_path.empty()) {
    save.emplace(models::open_kl_base(base_path, tokens, context, o.bos, config.vocab_size));
    o.save = &*save;
  }
  const uint32_t windows = models::perplexity_windows(tokens.size(), context);
  std::printf("perplexity: %zu tokens, %u windows of %u, %u scored a window\n", tokens.size(), windows, context,
              models::scored_per_window(context));
  const auto t0 = std::chrono::steady_clock::now();
  const models::PerplexityResult r = models::evaluate_perplexity(model, tokens, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (save) save->close();
  for (size_t w = 0; w < r.running_ppl.size(); ++w) std::printf("%s[%zu]%.4f", w ? "," : "", w + 1, r.running_ppl[w]);
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_error);
  std::fprintf(stderr, "%u windows in %.2f s (%.0f tokens/s)\n", windows, seconds, windows * double(context) / std::max(seconds, 1e-9));
  if (save) std::printf("KL-divergence base: %llu positions written to %s\n", (unsigned long long)r.scored, base_path.c_str());
  if (compare) {
    const auto s = models::summarize_kl(r);
    std::printf("\n====== KL divergence statistics (against %s) ======\n", base_path.c_str());
    std::printf("Mean    KLD: %11.4e +/- %11.4e\n", s.mean, s.mean_error);
    std::printf("Maximum KLD: %11.4e\n99.9%%   KLD: %11.4e\n99.0%%   KLD: %11.4e\n95.0%%   KLD: %11.4e\n", s.max, s.p99_9, s.p99, s.p95);
    std::printf("90.0%%   KLD: %11.4e\nMedian  KLD: %11.4e\n10.0%%   KLD: %11.4e\n 5.0%%   KLD: %11.4e\n", s.p90, s.median, s.p10, s.p5);
    std::printf(" 1.0%%   KLD: %11.4e\nMinimum KLD: %11.4e\n", s.p1, s.min);
    std::printf("Same top token: %.3f%% (%u of %u positions)\n", 100 * s.top1, r.top1_same, r.scored);
  }
  return 0;
}

const Command perplexity("perplexity", "perplexity of a text, and KL divergence against saved base logits", run_perplexity);

}  // namespace
}  // namespace bdsl::tools
