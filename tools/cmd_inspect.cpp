// `bitnet-dsl inspect MODEL.gguf [--json] [--max-items N]`: the header, the metadata (long arrays
// summarised as their first items and count) and the tensor table, like gguf-dump.
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/formats/gguf.h"
#include "models/formats/json_escape.h"
#include "tools/command.h"

namespace bdsl::tools {
namespace {

using models::GgufFile;
using models::GgufValue;
using models::GgufValueType;

constexpr const char* kUsage =
    "usage: bitnet-dsl inspect MODEL.gguf [--json] [--max-items N]\n"
    "  Prints the GGUF header, metadata and tensor table (name, type, shape, offset, bytes).\n"
    "  --json         machine-readable output\n"
    "  --max-items N  array items shown before the count (default 8)\n";

struct Options {
  std::string path;
  bool json = false;
  uint64_t max_items = 8;
};

Options parse_args(const Args& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--max-items") {
      if (++i == args.size()) throw UsageError("--max-items needs a number");
      try {
        o.max_items = std::stoull(args[i]);
      } catch (const std::exception&) {
        throw UsageError(fmt::format("--max-items: expected a number, found '{}'", args[i]));
      }
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError(fmt::format("unknown option '{}'\n{}", a, kUsage));
    } else if (o.path.empty()) {
      o.path = a;
    } else {
      throw UsageError(fmt::format("one model file expected, found '{}' too", a));
    }
  }
  if (o.path.empty()) throw UsageError(fmt::format("missing MODEL.gguf\n{}", kUsage));
  return o;
}

// "uint32", or "array<string>[128256]" for arrays.
std::string type_text(const GgufValue& v) {
  if (v.type() != GgufValueType::ARRAY) return std::string(models::gguf_value_type_name(v.type()));
  const auto& a = v.as_array();
  return fmt::format("array<{}>[{}]", models::gguf_value_type_name(a.element_type()), a.size());
}

// Keys and names as they are, unless they hold control characters or invalid UTF-8: then quoted
// and escaped, so a hostile file cannot drive the terminal.
std::string display(std::string_view s) {
  std::string quoted = models::quote_json_string(s);
  return quoted.size() == s.size() + 2 ? std::string(s) : quoted;
}

std::string shape_text(const std::vector<uint64_t>& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

void print_text(const GgufFile& f, const Options& o) {
  fmt::print("file: {}\nGGUF v{}, {} bytes, alignment {}, data section at byte {}\n\n", f.name(),
             f.version(), f.bytes().size(), f.alignment(), f.data_offset());
  fmt::print("metadata ({} keys):\n", f.metadata().size());
  for (const auto& kv : f.metadata())
    fmt::print("  {:<44} {:<22} {}\n", display(kv.key), type_text(kv.value), kv.value.to_string(o.max_items));
  fmt::print("\ntensors ({}):\n  {:>4}  {:<32} {:<6} {:<18} {:>12} {:>12}\n", f.tensors().size(), "#",
             "name", "type", "shape", "offset", "bytes");
  std::size_t i = 0;
  for (const auto& t : f.tensors())
    fmt::print("  {:>4}  {:<32} {:<6} {:<18} {:>12} {:>12}\n", i++, display(t.name),
               models::ggml_type_name(t.type), shape_text(t.dims), t.file_offset, t.n_bytes);
}

void print_json(const GgufFile& f, const Options& o) {
  using models::quote_json_string;
  fmt::print("{{\n  \"file\": {},\n  \"version\": {},\n  \"size\": {},\n  \"alignment\": {},\n"
             "  \"data_offset\": {},\n  \"metadata\": [",
             quote_json_string(f.name()), f.version(), f.bytes().size(), f.alignment(), f.data_offset());
  const char* sep = "\n";
  for (const auto& kv : f.metadata()) {
    const bool array = kv.value.type() == GgufValueType::ARRAY;
    fmt::print("{}    {{\"key\": {}, \"type\": \"{}\"", sep, quote_json_string(kv.key),
               models::gguf_value_type_name(kv.value.type()));
    if (array)
      fmt::print(", \"element_type\": \"{}\", \"count\": {}",
                 models::gguf_value_type_name(kv.value.as_array().element_type()), kv.value.as_array().size());
    fmt::print(", \"value\": {}}}", kv.value.to_string(o.max_items, true));
    sep = ",\n";
  }
  fmt::print("\n  ],\n  \"tensors\": [");
  sep = "\n";
  for (const auto& t : f.tensors()) {
    fmt::print("{}    {{\"name\": {}, \"type\": \"{}\", \"shape\": {}, \"offset\": {}, \"bytes\": {}}}", sep,
               quote_json_string(t.name), models::ggml_type_name(t.type), shape_text(t.dims),
               t.file_offset, t.n_bytes);
    sep = ",\n";
  }
  fmt::print("\n  ]\n}}\n");
}

int run_inspect(const Args& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const Options o = parse_args(args);
  const GgufFile f = GgufFile::open(o.path);
  if (o.json) print_json(f, o);
  else print_text(f, o);
  return 0;
}

const Command kInspect("inspect", "print a GGUF file's metadata and tensor table", run_inspect);

}  // namespace
}  // namespace bdsl::tools
