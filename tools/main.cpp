// bitnet-dsl: one program, many subcommands (see command.h). Every error a user can cause ends
// as one line on stderr and a non-zero exit, never a stack trace.
#include <cstdio>
#include <exception>

#include "tools/command.h"

namespace bdsl::tools {

static std::vector<CommandInfo>& registry() {
  static std::vector<CommandInfo> all;
  return all;
}

Command::Command(std::string name, std::string summary, std::function<int(const Args&)> run) {
  registry().push_back({std::move(name), std::move(summary), std::move(run)});
}

const std::vector<CommandInfo>& commands() { return registry(); }

const char* version_line() { return "bitnet-dsl " BDSL_VERSION; }

static void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: bitnet-dsl COMMAND [ARGS...]\n\ncommands:\n");
  for (const auto& c : commands()) std::fprintf(out, "  %-12s %s\n", c.name.c_str(), c.summary.c_str());
  std::fprintf(out, "\n`bitnet-dsl COMMAND --help` describes one command.\n");
}

}  // namespace bdsl::tools

int main(int argc, char** argv) {
  using namespace bdsl::tools;
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("%s\n", version_line());
    return 0;
  }
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    try {
      return c.run(Args(argv + 2, argv + argc));
    } catch (const UsageError& e) {
      std::fprintf(stderr, "bitnet-dsl %s: %s\n", name.c_str(), e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bitnet-dsl %s: %s\n", name.c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "bitnet-dsl: unknown command '%s' (try `bitnet-dsl help`)\n", name.c_str());
  return 2;
}
