// `bitnet-dsl shaders [--op NAME] [--device N] [--exact-norm]`: lists the ops, or prints one op's
// GLSL and the SHA-256 key of its binary, built for the chosen device (and with the RMSNorm scale
// `run --exact-norm` asks for), so anyone can read what runs.
#include <cstdio>

#include "codegen/glsl_printer.h"
#include "codegen/interface_of.h"
#include "codegen/shader_cache.h"
#include "ops/catalog.h"
#include "ops/common.h"
#include "runtime/context.h"
#include "tools/command.h"

namespace bdsl::tools {
namespace {

int run_shaders(const Args& args) {
  std::string op, device;
  bool offline = false, exact_norm = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--op" && i + 1 < args.size()) op = args[++i];
    else if (args[i] == "--device" && i + 1 < args.size()) device = args[++i];
    else if (args[i] == "--no-device") offline = true;
    else if (args[i] == "--exact-norm") exact_norm = true;
    else if (args[i] == "--help") {
      std::printf("usage: bitnet-dsl shaders [--op NAME] [--device N|NAME | --no-device] [--exact-norm]\n"
                  "  without --op: the list of ops; with it: its GLSL and SHA-256 cache key.\n"
                  "  --exact-norm: the kernels as `run --exact-norm` builds them (bitnet.cpp's RMSNorm scale, in f64;\n"
                  "  refused for a device without f64; --no-device assumes one).\n"
                  "  Kernels are built for the device's subgroup size and limits (--no-device: defaults).\n");
      return 0;
    } else throw UsageError("unknown argument '" + args[i] + "' (try --help)");
  }
  ops::OpTarget target;
  if (!offline) {
    rt::ContextOptions options;
    options.device = device;
    target = ops::OpTarget::from(rt::Context(options).info());
  } else {
    target.float64 = exact_norm;
  }
  target = ops::with_exact_norm_scale(target, exact_norm);
  if (op.empty()) {
    for (const auto& e : ops::catalog()) std::printf("%-28s %s\n", e.name.c_str(), e.summary.c_str());
    return 0;
  }
  for (const auto& e : ops::catalog()) {
    if (e.name != op) continue;
    const dsl::Kernel kernel = e.build(target);
    const std::string glsl = codegen::print_glsl(kernel);
    std::printf("%s", glsl.c_str());
    std::printf("// sha256: %s\n", codegen::ShaderCache::key_of(glsl, {}).c_str());
    return 0;
  }
  throw UsageError("no op named '" + op + "' (run `bitnet-dsl shaders` for the list)");
}

const Command shaders("shaders", "list the ops, or print one op's GLSL and SHA-256 (--op NAME)", run_shaders);

}  // namespace
}  // namespace bdsl::tools
