// Per-layer validation of the GPU model against the CPU reference, two ways:
//  - op by op (the verdict): at every position of the stored prompt and of the greedy
//    continuation, the reference recomputes each fused step of the decode graph from the GPU's
//    own inputs to it (models/bitnet/op_local_check.h) and each materialized tensor must match it
//    tightly; the GPU's greedy choice must be the reference LM head's argmax (up to a near tie).
//  - end to end (drift): the GPU's run against golden data written by the CPU reference alone
//    (golden/golden_data.h), which lets an early one-step int8 rounding difference travel; it
//    must stay close (a real bug is off by O(1)), and the continuation match is reported.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "golden/golden_compare.h"
#include "models/formats/gguf.h"
#include "runtime/context.h"

namespace bdsl::bitnet {

// Max |gpu - cpu| allowed, relative to the tensor's largest magnitude. Both sides keep the KV
// cache in F16 and every ternary accumulator is an exact integer, so what differs is the fp32
// summation order (RMSNorm, attention, LM head: ~1e-6 relative). The int8 quantization in front
// of each projection can turn such a nudge into one quantization step for a value that sat exactly
// on a rounding boundary: it moves every output of the projection by up to scale / s (seen: 2e-4
// of the tensor), and in relu(gate)^2 * up both factors move (seen: 1.0e-3 in ffn_out on a
// GPU). 4e-3 leaves room for one such step and fails any real bug (a wrong scale, sign, head or
// position is off by O(1)); the cosine bound catches a spread of small errors.
inline constexpr double kGpuTolerance = 4e-3;
inline constexpr double kGpuMinCosine = 0.99999;
// End to end, after a rounding difference has travelled through later layers and positions.
inline constexpr double kDriftMinCosine = 0.999;
// The GPU's greedy token may differ from the reference argmax only by a tie this close
// (relative to the largest |logit|).
inline constexpr double kArgmaxTieTolerance = 1e-4;

struct TensorCheck {
  std::string name;
  golden::TensorDiff diff;
  bool pass = false;  // within kGpuTolerance and kGpuMinCosine
  bool sane = false;  // finite and cosine >= kDriftMinCosine (what end to end must meet)
};

struct ValidationReport {
  std::vector<TensorCheck> local;    // op by op, over every position: in graph order
  std::vector<TensorCheck> tensors;  // end to end against the golden data, logits last
  std::vector<int32_t> expected_continuation, continuation;
  std::vector<std::string> argmax_mismatches;  // "position P: chose A, reference argmax B"
  std::vector<std::string> not_materialized;   // golden tensors the fused graph never writes
  // The GPU's free-running prompt logits against the golden data's, per prompt position:
  // KL(golden || GPU) and whether the top tokens agree (reported, not part of the verdict).
  std::vector<double> logits_kl;
  uint32_t top1_agree = 0;
  bool pass() const;
};

// exact_norm_scale: ModelOptions::exact_norm_scale.
ValidationReport validate_against_golden(rt::Context& ctx, const models::GgufFile& model,
                                         const std::filesystem::path& golden_dir, bool exact_norm_scale = false);

// The report as a table: one line per tensor, then the continuation and the verdict.
std::string format_report(const ValidationReport& report);

}  // namespace bdsl::bitnet
