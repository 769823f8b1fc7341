// `bitnet-dsl validate -m MODEL.gguf [--golden DIR]`: runs the GPU model on the prompt stored in
// DIR and prints, per tensor and layer, how it compares with the CPU reference; exit 0 only on a
// pass. Without --golden: the tiny model's golden data, installed beside the tool or in the sources.
#include <cstdio>

#include "golden/golden_data.h"
#include "models/bitnet/golden_check.h"
#include "models/formats/gguf.h"
#include "tools/command.h"

namespace bdsl::tools {
namespace {

namespace fs = std::filesystem;

fs::path default_golden_dir() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  const fs::path installed = exe.parent_path().parent_path() / "share" / "bitnet-dsl" / "golden" / "tiny";
  if (!error && fs::exists(installed / "manifest.json")) return installed;
  return fs::path(BDSL_GOLDEN_DIR) / "tiny";
}

int run_validate(const Args& args) {
  std::string model, golden_dir, device;
  bool exact_norm = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool has_value = i + 1 < args.size();
    if ((args[i] == "-m" || args[i] == "--model") && has_value) model = args[++i];
    else if (args[i] == "--golden" && has_value) golden_dir = args[++i];
    else if (args[i] == "--device" && has_value) device = args[++i];
    else if (args[i] == "--exact-norm") exact_norm = true;
    else if (args[i] == "--help") {
      std::printf("usage: bitnet-dsl validate -m MODEL.gguf [--golden DIR] [--device N|NAME] [--exact-norm]\n"
                  "  DIR is a folder written by `bitnet-dsl make-golden`; by default the tiny model's\n"
                  "  (%s), for the model `bitnet-dsl make-model FILE --preset tiny` writes\n",
                  default_golden_dir().c_str());
      std::printf("  --exact-norm: the kernels' RMSNorm scale at bitnet.cpp's rounding points (the norms and\n"
                  "  the int8 activations then match the reference bit for bit; needs f64 on the device)\n");
      return 0;
    } else throw UsageError("unknown or incomplete argument '" + args[i] + "' (try --help)");
  }
  if (model.empty()) throw UsageError("missing -m MODEL.gguf");
  if (golden_dir.empty()) golden_dir = default_golden_dir().string();
  if (!fs::is_directory(golden_dir)) throw UsageError("golden folder '" + golden_dir + "' does not exist");
  golden::check_golden_model(golden_dir, model);
  const auto file = models::GgufFile::open(model);
  rt::ContextOptions options;
  options.device = device;
  rt::Context ctx(options);
  std::printf("device: %s\nmodel: %s\ngolden: %s\nRMSNorm scale: %s\n", ctx.info().summary().c_str(), model.c_str(),
              golden_dir.c_str(), exact_norm ? "bitnet.cpp's (--exact-norm)" : "f32 (the default)");
  const auto report = bitnet::validate_against_golden(ctx, file, golden_dir, exact_norm);
  std::printf("%s", bitnet::format_report(report).c_str());
  return report.pass() ? 0 : 1;
}

const Command validate("validate", "compare the GPU model layer by layer with golden data (--golden DIR)",
                       run_validate);

}  // namespace
}  // namespace bdsl::tools
