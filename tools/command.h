// The `bitnet-dsl` program is a set of subcommands; each lives in its own cmd_*.cpp file and
// registers itself with a static Command object, so adding one touches no other file.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace bdsl::tools {

using Args = std::vector<std::string>;  // the arguments after the subcommand's name

struct Command {
  Command(std::string name, std::string summary, std::function<int(const Args&)> run);
};

struct CommandInfo {
  std::string name;
  std::string summary;
  std::function<int(const Args&)> run;
};
const std::vector<CommandInfo>& commands();
const char* version_line();  // "bitnet-dsl 0.1.0": `bitnet-dsl --version`, `run --version`

// A mistake the user can fix (bad flag, missing file): main prints "bitnet-dsl: <message>" and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace bdsl::tools
