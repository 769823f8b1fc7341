#include "ops/tuning.h"

#include <string_view>

namespace bdsl::ops {
namespace {

struct Row {
  std::string_view device;  // a prefix of the Vulkan device name; empty: every other device
  Tuning tuning;
};

// Every value below was measured on an NVIDIA H100 80GB HBM3 with bitnet-dsl-bench at the 2B-4T
// shape (bench/RESULTS.md): rows per subgroup run 3; gate/up's 128 invocations, positions per
// pass and the head split run 7; the deferred combine run 5; attn_output's 4 rows run 10; top-k's
// 1024 invocations and the tensor-core tiles in the runs that introduced them; the prompt blocks'
// tensor-core tiles and attention (run 23) on an NVIDIA H200 (same driver and SM count). Run 30
// swept every decode shape again on the H100 (each default was the fastest) and the prompt
// tiles: there the short projections (Q, K, V, attn_output) run 1% faster in 64 x 32 tiles
// (prefill-512 33.2k / 32.4k against 32.7k / 32.1k in two calls, 2,048 tokens +0.6-0.9%), the
// rest as on the H200. Run 37: gate/up in 128 x 128 tiles (their accumulators leave in two
// passes) run prefill 1-2% faster on the H100 (512 tokens 33.07k / 33.32k against 32.87k /
// 32.86k, 2,048 tokens 25.50k / 25.51k against 25.12k / 24.89k). No other kind of device has
// been measured yet, so the H200's values are the default row; a device that differs gets a row
// of its own above it, with the run that shows why.
constexpr Tuning h100_tuning() {
  Tuning t;
  t.coop_tile_short = {4, 2, 1, 2, false};
  t.coop_tile_tall = {4, 2, 2, 8, false};
  return t;
}

constexpr Row kTable[] = {
    {"NVIDIA H100", h100_tuning()},
    {"", Tuning{}},
};

std::optional<Tuning>& overridden() {
  static std::optional<Tuning> t;
  return t;
}

}  // namespace

void override_tuning(const std::optional<Tuning>& t) { overridden() = t; }

ScopedTuning::ScopedTuning(const Tuning& t) : previous_(overridden()) { overridden() = t; }
ScopedTuning::~ScopedTuning() { overridden() = previous_; }

const Tuning& tuning_for(const OpTarget& target) {
  if (overridden()) return *overridden();
  for (const Row& row : kTable)
    if (std::string_view(target.device_name).starts_with(row.device)) return row.tuning;
  return kTable[std::size(kTable) - 1].tuning;
}

}  // namespace bdsl::ops
