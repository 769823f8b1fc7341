#include "models/bitnet/golden_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "golden/npy.h"
#include "golden/reference_model.h"
#include "models/numerics/logit_stats.h"
#include "models/bitnet_config.h"
#include "models/bitnet/bitnet_model.h"
#include "models/bitnet/op_local_check.h"

namespace bdsl::bitnet {

bool ValidationReport::pass() const {
  for (const auto& t : local)
    if (!t.pass) return false;
  for (const auto& t : tensors)
    if (!t.sane) return false;
  return !local.empty() && !tensors.empty() && argmax_mismatches.empty() &&
         continuation.size() == expected_continuation.size();
}

namespace {

TensorCheck check(const std::string& name, const std::vector<float>& expected, const std::vector<float>& actual) {
  TensorCheck c{name, golden::compare_tensors(expected, actual), false, false};
  c.pass = golden::within_tolerance(c.diff, kGpuTolerance) && c.diff.cosine >= kGpuMinCosine;
  c.sane = !c.diff.nan_or_inf && c.diff.cosine >= kDriftMinCosine;
  return c;
}

}  // namespace

ValidationReport validate_against_golden(rt::Context& ctx, const models::GgufFile& file,
                                         const std::filesystem::path& dir, bool exact_norm_scale) {
  const auto prompt = golden::read_npy_i32(dir / "prompt.npy");
  const auto continuation = golden::read_npy_i32(dir / "continuation.npy");
  const auto config = models::BitNetConfig::from_gguf(file);
  ModelOptions options;
  options.dump = true;
  options.exact_norm_scale = exact_norm_scale;
  BitNetModel model(ctx, file, config, options);

  // Run the prompt one token at a time, then the greedy continuation; keep every step's dumps
  // (each one row of a [tokens, features] tensor) and argmax.
  const size_t n_prompt = prompt.data.size(), n_new = continuation.data.size();
  std::vector<StepDumps> steps;
  std::vector<int32_t> chosen;
  auto run_step = [&](int32_t token, uint32_t pos) {
    const StepOutput out = model.step(token, pos);
    steps.push_back(model.dumps());
    chosen.push_back(out.argmax);
  };
  for (size_t t = 0; t < n_prompt; ++t) run_step(prompt.data[t], uint32_t(t));
  ValidationReport report;
  report.expected_continuation = continuation.data;
  for (size_t i = 0; i < n_new; ++i) {
    report.continuation.push_back(chosen.back());
    if (i + 1 < n_new) run_step(chosen.back(), uint32_t(n_prompt + i));
  }
  const auto positions = uint32_t(steps.size());
  std::vector<std::vector<float>> k_cache, v_cache;
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    auto [k, v] = model.kv_cache(l, positions);
    k_cache.push_back(std::move(k));
    v_cache.push_back(std::move(v));
  }
  const uint64_t kv = config.kv_dim();
  // What the GPU produced for `name` at positions 0..count-1: dumped rows, or (Kcur-N, Vcur-N)
  // the cache rows widened from F16.
  auto gpu_rows = [&](const std::string& name, size_t count) {
    std::vector<float> rows;
    if (name.starts_with("Kcur-") || name.starts_with("Vcur-")) {
      const auto& c = (name[0] == 'K' ? k_cache : v_cache)[std::stoul(name.substr(5))];
      rows.assign(c.begin(), c.begin() + int64_t(count * kv));
      return rows;
    }
    for (size_t t = 0; t < count; ++t) {
      const auto& v = steps[t].at(name);
      rows.insert(rows.end(), v.begin(), v.end());
    }
    return rows;
  };

  // Op by op at every position, the reference following the GPU's inputs.
  const OpLocalReference reference(file);
  std::map<std::string, std::vector<float>> expected;
  for (uint32_t t = 0; t < positions; ++t) reference.expect(t, steps[t], k_cache, v_cache, expected);
  std::vector<std::string> order = model.dump_names();
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    order.push_back(fmt::format("Kcur-{}", l));
    order.push_back(fmt::format("Vcur-{}", l));
  }
  for (const auto& name : order) {
    auto it = expected.find(name);
    if (it != expected.end()) report.local.push_back(check(name, it->second, gpu_rows(name, positions)));
  }
  // The greedy choice against the reference LM head applied to the GPU's normed vector.
  const auto& ref_logits = expected.at("result_output");
  const size_t vocab = config.vocab_size;
  for (uint32_t t = 0; t < positions; ++t) {
    const std::span<const float> r(ref_logits.data() + t * vocab, vocab);
    const int32_t best = golden::argmax(r);
    float scale = 0;
    for (float v : r) scale = std::max(scale, std::fabs(v));
    if (r[size_t(chosen[t])] < r[size_t(best)] - kArgmaxTieTolerance * scale)
      report.argmax_mismatches.push_back(fmt::format("position {}: chose {}, reference argmax {}", t, chosen[t], best));
  }

  // End to end over the prompt against the golden data.
  for (const auto& name : order) {
    const auto path = dir / (name + ".npy");
    if (std::filesystem::exists(path))
      report.tensors.push_back(check(name, golden::read_npy_f32(path).data, gpu_rows(name, n_prompt)));
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string stem = entry.path().stem().string();
    if (entry.path().extension() == ".npy" && std::find(order.begin(), order.end(), stem) == order.end() &&
        stem.find("_acc-") == std::string::npos &&
        stem != "prompt" && stem != "continuation" && stem != "logits")
      report.not_materialized.push_back(stem);
  }
  std::sort(report.not_materialized.begin(), report.not_materialized.end());
  const auto golden_logits = golden::read_npy_f32(dir / "logits.npy").data;
  const auto gpu_logits = gpu_rows("result_output", n_prompt);
  report.tensors.push_back(check("logits", golden_logits, gpu_logits));
  if (golden_logits.size() == gpu_logits.size())
    for (size_t t = 0; t < n_prompt; ++t) {
      const std::span<const float> want(golden_logits.data() + t * vocab, vocab), got(gpu_logits.data() + t * vocab, vocab);
      report.logits_kl.push_back(numerics::kl_divergence(want, got));
      report.top1_agree += numerics::top_index(want) == numerics::top_index(got);
    }
  return report;
}

std::string format_report(const ValidationReport& r) {
  auto table = [](const std::vector<TensorCheck>& checks, bool end_to_end) {
    std::string out = fmt::format("{:<18} {:>10} {:>12} {:>12}  {}\n", "tensor", "cosine", "max abs err",
                                  "max rel err", "verdict");
    for (const auto& t : checks)
      out += fmt::format("{:<18} {:>10.6f} {:>12.3e} {:>12.3e}  {}\n", t.name, t.diff.cosine, t.diff.max_abs_error,
                         t.diff.max_rel_error,
                         t.pass ? "pass" : (end_to_end && t.sane) ? "drift" : "FAIL");
    return out;
  };
  std::string out = "op by op (the reference recomputes each step from the GPU's inputs), every position:\n";
  out += table(r.local, false);
  out += fmt::format("tolerance: max abs err <= {} x the tensor's max |value|, cosine >= {}\n", kGpuTolerance,
                     kGpuMinCosine);
  out += r.argmax_mismatches.empty() ? "greedy choice = reference argmax at every position\n"
                                     : fmt::format("greedy choice MISMATCH: {}\n", fmt::join(r.argmax_mismatches, "; "));
  out += "\nend to end against the golden data (the CPU reference alone), prompt positions:\n";
  out += table(r.tensors, true);
  out += fmt::format("drift: a one-step int8 rounding difference may travel; each tensor needs cosine >= {}\n",
                     kDriftMinCosine);
  if (!r.not_materialized.empty())
    out += fmt::format("fused in the decode graph, not compared: {}\n", fmt::join(r.not_materialized, " "));
  if (!r.logits_kl.empty()) {
    double sum = 0, worst = 0;
    for (double kl : r.logits_kl) sum += kl, worst = std::max(worst, kl);
    out += fmt::format("free-running prompt logits against the golden data: mean KL divergence {:.3e}, max {:.3e}; "
                       "top-1 agrees at {} of {} positions\n",
                       sum / double(r.logits_kl.size()), worst, r.top1_agree, r.logits_kl.size());
  }
  out += fmt::format("greedy continuation: {}\n   golden continuation: {}  {}\n", fmt::join(r.continuation, ","),
                     fmt::join(r.expected_continuation, ","),
                     r.continuation == r.expected_continuation ? "match" : "differs (see the op-by-op verdict)");
  out += r.pass() ? "validate: PASS\n" : "validate: FAIL\n";
  return out;
}

}  // namespace bdsl::bitnet
