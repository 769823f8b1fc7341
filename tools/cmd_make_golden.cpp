// bitnet-dsl make-golden: regenerates a golden folder (golden/golden_data.h) from a synthetic model.
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include <unistd.h>

#include "golden/golden_data.h"
#include "tools/command.h"

namespace bdsl::tools {

namespace {

constexpr const char* kUsage =
    "usage: bitnet-dsl make-golden --out DIR [--preset tiny] [--seed S] [--model FILE] [--prompt TEXT] [-n N]\n"
    "Makes the synthetic model in a temporary folder (or takes the model FILE: any shape and weight\n"
    "type), runs the CPU reference on the prompt (one batch, every intermediate recorded) and N\n"
    "greedy tokens after it, and writes DIR: .npy files and manifest.json, which `bitnet-dsl validate\n"
    "-m MODEL --golden DIR` checks the GPU against. The committed data:\n"
    "bitnet-dsl make-golden --preset tiny --out golden/data/tiny\n";

int run(const Args& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::string preset = "tiny";
  std::filesystem::path out;
  golden::GoldenSpec spec = golden::default_golden_spec(preset);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) throw UsageError(a.rfind("-", 0) == 0 ? a + " needs a value" : "unexpected '" + a + "'");
    const std::string& v = args[++i];
    try {
      if (a == "--out") out = v;
      else if (a == "--preset") spec.preset = v;
      else if (a == "--seed") spec.seed = std::stoull(v);
      else if (a == "--model") spec.model = v;
      else if (a == "--prompt") spec.prompt = v;
      else if (a == "-n") spec.n_continuation = std::stoul(v);
      else throw UsageError("unknown flag '" + a + "' (see --help)");
    } catch (const std::logic_error& e) {  // std::stoull's invalid_argument / out_of_range
      throw UsageError(a + " expects a whole number, got '" + v + "'");
    }
  }
  if (out.empty()) throw UsageError("missing --out DIR");
  golden::GoldenRun run;
  if (!spec.model.empty()) {
    spec.preset.clear();
    run = golden::make_golden_for_model(spec, out);
  } else {
    const auto work = std::filesystem::temp_directory_path() / ("bitnet-dsl-make-golden-" + std::to_string(getpid()));
    run = golden::make_golden(spec, out, work);
    std::filesystem::remove_all(work);
  }
  std::printf("%s: %zu prompt tokens, %zu tensors, %zu accumulators, continuation of %zu tokens\n",
              out.string().c_str(), run.prompt_ids.size(), run.prompt_pass.names().size(),
              run.prompt_pass.accumulator_names().size(), run.continuation.size());
  return 0;
}

const Command kCommand("make-golden", "regenerate golden data from the CPU reference (golden/data/tiny)", run);

}  // namespace

}  // namespace bdsl::tools
