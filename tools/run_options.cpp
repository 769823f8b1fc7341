#include "tools/run_options.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tools/flag_number.h"

namespace bdsl::tools {

const char* const kRunUsage =
    "usage: bitnet-dsl run -m MODEL.gguf [-p TEXT | -f FILE | --prompt-ids 1,2,3] [options]\n"
    "  -f, --file FILE   the prompt is the text of FILE\n"
    "  -n N              tokens to generate (default 128); -1: until the end of generation or a full context\n"
    "  -c, --ctx-size N  positions the KV cache holds, at most the trained context (default: the trained\n"
    "                    context); a smaller one takes less device memory\n"
    "  Sampling, with llama.cpp's meanings and order (top-k, top-p, min-p, then the temperature), drawn on\n"
    "  the device:\n"
    "  --temp T          temperature; 0 is greedy (default 0.8)\n"
    "  --top-k K         keep the K most likely tokens, 1..128; 0 = no cut: top-p and min-p over the whole\n"
    "                    vocabulary, exactly (default 40)\n"
    "  --top-p P         keep the fewest most likely tokens whose probability reaches P; 1 = off (default 0.95)\n"
    "  --min-p P         keep tokens at least P times as likely as the most likely one; 0 = off (default 0)\n"
    "  --repeat-penalty F  before all of these: each distinct token among the last N (prompt included) has\n"
    "                    its logit divided by F where positive, multiplied where not; 1 = off (default 1)\n"
    "  --repeat-last-n N the window of --repeat-penalty, at most 1024; 0 = off, -1 = the context (default 64)\n"
    "  -s, --seed S      the same seed gives the same text, on any device and beside any other streams\n"
    "                    (default: random, printed)\n"
    "  --chat            wrap the prompt in the chat template the model was trained on\n"
    "  -i                interactive chat\n"
    "  --ids             print the generated token ids as one comma-separated line\n"
    "  --dump-logits F   write the logits of every prompt position and step to F (.npy)\n"
    "  --dump-layers DIR write every intermediate of the prompt pass as DIR/<name>.npy\n"
    "  --device N|NAME   the Vulkan device (see --list-devices)\n"
    "  --no-mmap         copy the weights into device memory even where the device could read them in\n"
    "                    place from the mapped file (a CPU device such as lavapipe)\n"
    "  --exact-norm      RMSNorm's scale at bitnet.cpp's rounding points: int8 activations and int32\n"
    "                    accumulators bitnet.cpp's bit for bit (needs f64 on the device; slower)\n"
    "  --list-devices    list the Vulkan devices and exit\n"
    "  --version         print the version and exit\n"
    "Ctrl-C stops the generation and prints its statistics (in -i: back to the prompt; a second\n"
    "Ctrl-C, or one at the prompt, exits).\n";

namespace {

std::string read_prompt_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("--file: cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw UsageError("--file: error reading '" + path + "'");
  return text.str();
}

std::vector<int32_t> id_list(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const int32_t id = flag_number<int32_t>("--prompt-ids", text.substr(start, comma - start));
    if (id < 0) throw UsageError("--prompt-ids: negative token id " + std::to_string(id));
    ids.push_back(id);
    start = comma + 1;
  }
  return ids;
}

}  // namespace

RunOptions parse_run_options(const Args& args) {
  RunOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (a == "-m" || a == "--model") o.model = value();
    else if (a == "-p" || a == "--prompt") o.prompt = value();
    else if (a == "--prompt-ids") o.prompt_ids = id_list(value()), o.has_prompt_ids = true;
    else if (a == "-n" || a == "--n-predict") {
      const int64_t n = flag_number<int64_t>(a, value(), -1, UINT32_MAX);
      o.n_predict = n < 0 ? UINT32_MAX : uint32_t(n);  // -1: as many as the context holds
    } else if (a == "-f" || a == "--file") o.prompt = read_prompt_file(value());
    else if (a == "-c" || a == "--ctx-size") o.ctx_size = flag_number<uint32_t>(a, value(), 1, 1u << 24);
    else if (a == "--no-mmap") o.no_mmap = true;
    else if (a == "--exact-norm") o.exact_norm = true;
    else if (a == "--temp") o.sampling.temperature = flag_number<float>(a, value());
    else if (a == "--top-k") o.sampling.top_k = flag_number<uint32_t>(a, value());
    else if (a == "--top-p") o.sampling.top_p = flag_number<float>(a, value());
    else if (a == "--min-p") o.sampling.min_p = flag_number<float>(a, value());
    else if (a == "--repeat-penalty") o.sampling.repeat_penalty = flag_number<float>(a, value());
    else if (a == "--repeat-last-n") {
      const int64_t n = flag_number<int64_t>(a, value(), -1, int64_t{models::kMaxRepeatLastN});
      o.sampling.repeat_last_n = n < 0 ? kWholeContext : uint32_t(n);  // -1: resolved once the context is known
    }
    else if (a == "-s" || a == "--seed") o.sampling.seed = flag_number<uint64_t>(a, value()), o.seed_given = true;
    else if (a == "--chat") o.chat = true;
    else if (a == "-i" || a == "--interactive") o.interactive = true;
    else if (a == "--ids") o.print_ids = true;
    else if (a == "--dump-logits") o.dump_logits = value();
    else if (a == "--dump-layers") o.dump_layers = value();
    else if (a == "--device") o.device = value();
    else if (a == "--list-devices") o.list_devices = true;
    else if (a == "-h" || a == "--help") o.help = true;
    else if (a == "--version") o.version = true;
    else throw UsageError("unknown flag '" + a + "' (try --help)");
  }
  if (!(o.sampling.temperature >= 0) || !std::isfinite(o.sampling.temperature))
    throw UsageError("--temp must be >= 0");
  if (o.sampling.top_k > 128) throw UsageError("--top-k must be at most 128, got " + std::to_string(o.sampling.top_k));
  if (!(o.sampling.top_p > 0 && o.sampling.top_p <= 1)) throw UsageError("--top-p must be in (0, 1]");
  if (!(o.sampling.min_p >= 0 && o.sampling.min_p <= 1)) throw UsageError("--min-p must be in [0, 1]");
  if (!(o.sampling.repeat_penalty > 0) || !std::isfinite(o.sampling.repeat_penalty))
    throw UsageError("--repeat-penalty must be > 0 (1 = off)");
  if (models::penalizes(o.sampling) && (!o.dump_layers.empty() || !o.dump_logits.empty()))
    throw UsageError("--repeat-penalty runs in the device's sampler: not with --dump-logits or --dump-layers");
  if (o.has_prompt_ids && !o.prompt.empty()) throw UsageError("give either -p or --prompt-ids, not both");
  if (o.interactive && (o.has_prompt_ids || !o.dump_layers.empty() || !o.dump_logits.empty()))
    throw UsageError("-i takes no --prompt-ids, --dump-logits or --dump-layers");
  return o;
}

}  // namespace bdsl::tools
