// Per-layer validation of the GPU model against golden data written by the CPU reference
// (golden/golden_data.h): runs the stored prompt token by token through the recorded decode graph,
// compares every intermediate the graph materializes and the logits at every position, then the
// greedy continuation.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "golden/golden_compare.h"
#include "models/gguf.h"
#include "runtime/context.h"

namespace bdsl::bitnet {

// Max |gpu - cpu| allowed, relative to the tensor's largest magnitude. Both sides keep the KV
// cache in F16 and every ternary accumulator is an exact integer, so what differs is the fp32
// summation order (RMSNorm, attention, LM head: ~1e-6 relative). The int8 quantization in front
// of each projection can turn such a nudge into one quantization step for a value that sat exactly
// on a rounding boundary (seen: 2e-4 relative in one tensor of the tiny model); 1e-3 leaves room
// for that and fails any real bug (a wrong scale, sign, head or position is off by O(1)).
inline constexpr double kGpuTolerance = 1e-3;
inline constexpr double kGpuMinCosine = 0.99999;

struct TensorCheck {
  std::string name;
  golden::TensorDiff diff;
  bool pass = false;
};

struct ValidationReport {
  std::vector<TensorCheck> tensors;  // in graph order, logits last
  std::vector<int32_t> expected_continuation, continuation;
  std::vector<std::string> not_materialized;  // golden tensors the fused graph never writes
  bool pass() const;
};

ValidationReport validate_against_golden(rt::Context& ctx, const models::GgufFile& model,
                                         const std::filesystem::path& golden_dir);

// The report as a table: one line per tensor, then the continuation and the verdict.
std::string format_report(const ValidationReport& report);

}  // namespace bdsl::bitnet
