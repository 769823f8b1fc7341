// `bitnet-dsl devices`: every Vulkan device, with the facts that decide which kernel variants run.
#include <cstdio>

#include "runtime/context.h"
#include "tools/command.h"

namespace bdsl::tools {
namespace {

int run_devices(const Args& args) {
  const bool verbose = !args.empty() && (args[0] == "-v" || args[0] == "--verbose");
  if (!args.empty() && !verbose) {
    if (args[0] == "--help") {
      std::printf("usage: bitnet-dsl devices [-v]\n  lists Vulkan devices; -v adds limits and features\n");
      return 0;
    }
    throw UsageError("unknown argument '" + args[0] + "' (try --help)");
  }
  const auto devices = rt::Context::list_devices();
  if (devices.empty()) throw std::runtime_error("no Vulkan device found");
  for (const auto& d : devices) std::printf("%s\n", verbose ? d.describe().c_str() : d.summary().c_str());
  return 0;
}

const Command devices("devices", "list the Vulkan devices (-v: limits and features)", run_devices);

}  // namespace
}  // namespace bdsl::tools
