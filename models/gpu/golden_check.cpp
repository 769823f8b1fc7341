#include "models/gpu/golden_check.h"

#include <fmt/format.h>

#include <map>

#include "golden/npy.h"
#include "models/bitnet_config.h"
#include "models/gpu/bitnet_model.h"

namespace bdsl::bitnet {

bool ValidationReport::pass() const {
  for (const auto& t : tensors)
    if (!t.pass) return false;
  return !tensors.empty() && continuation == expected_continuation;
}

namespace {

TensorCheck check(const std::string& name, const std::vector<float>& expected, const std::vector<float>& actual) {
  TensorCheck c{name, golden::compare_tensors(expected, actual), false};
  c.pass = golden::within_tolerance(c.diff, kGpuTolerance) && c.diff.cosine >= kGpuMinCosine;
  return c;
}

}  // namespace

ValidationReport validate_against_golden(rt::Context& ctx, const models::GgufFile& file,
                                         const std::filesystem::path& dir) {
  const auto prompt = golden::read_npy_i32(dir / "prompt.npy");
  const auto continuation = golden::read_npy_i32(dir / "continuation.npy");
  const auto config = models::BitNetConfig::from_gguf(file);
  ModelOptions options;
  options.dump = true;
  BitNetModel model(ctx, file, config, options);

  // Run the prompt one token at a time; each dump is one row of a [tokens, features] tensor.
  std::map<std::string, std::vector<float>> rows;
  StepOutput last;
  for (size_t t = 0; t < prompt.data.size(); ++t) {
    last = model.step(prompt.data[t], uint32_t(t));
    for (auto& [name, values] : model.dumps()) {
      auto& r = rows[name];
      r.insert(r.end(), values.begin(), values.end());
    }
  }
  // K (after RoPE) and V as the cache holds them, F16: within the tolerance of the f32 reference.
  std::vector<std::string> order = model.dump_names();
  const auto positions = uint32_t(prompt.data.size());
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    auto [k, v] = model.kv_cache(l, positions);
    rows[fmt::format("Kcur-{}", l)] = std::move(k);
    rows[fmt::format("Vcur-{}", l)] = std::move(v);
    order.push_back(fmt::format("Kcur-{}", l));
    order.push_back(fmt::format("Vcur-{}", l));
  }
  ValidationReport report;
  for (const auto& name : order) {
    const auto path = dir / (name + ".npy");
    if (!std::filesystem::exists(path)) continue;
    report.tensors.push_back(check(name, golden::read_npy_f32(path).data, rows[name]));
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string stem = entry.path().stem().string();
    if (entry.path().extension() == ".npy" && !rows.count(stem) && stem.find("_acc-") == std::string::npos &&
        stem != "prompt" && stem != "continuation" && stem != "logits")
      report.not_materialized.push_back(stem);
  }
  std::sort(report.not_materialized.begin(), report.not_materialized.end());
  report.tensors.push_back(check("logits", golden::read_npy_f32(dir / "logits.npy").data, rows["result_output"]));

  // Greedy continuation through the KV cache, from the last prompt position on.
  report.expected_continuation = continuation.data;
  int32_t next = last.argmax;
  for (size_t i = 0; i < continuation.data.size(); ++i) {
    report.continuation.push_back(next);
    if (i + 1 < continuation.data.size()) next = model.step(next, uint32_t(prompt.data.size() + i)).argmax;
  }
  return report;
}

std::string format_report(const ValidationReport& r) {
  std::string out = fmt::format("{:<18} {:>10} {:>12} {:>12}  {}\n", "tensor", "cosine", "max abs err",
                                "max rel err", "verdict");
  for (const auto& t : r.tensors)
    out += fmt::format("{:<18} {:>10.6f} {:>12.3e} {:>12.3e}  {}\n", t.name, t.diff.cosine, t.diff.max_abs_error,
                       t.diff.max_rel_error, t.pass ? "pass" : "FAIL");
  out += fmt::format("tolerance: max abs err <= {} x the tensor's max |value|, cosine >= {}\n", kGpuTolerance,
                     kGpuMinCosine);
  if (!r.not_materialized.empty())
    out += fmt::format("fused in the decode graph, not compared: {}\n", fmt::join(r.not_materialized, " "));
  out += fmt::format("greedy continuation: {}\n   golden continuation: {}  {}\n", fmt::join(r.continuation, ","),
                     fmt::join(r.expected_continuation, ","),
                     r.continuation == r.expected_continuation ? "match" : "MISMATCH");
  out += r.pass() ? "validate: PASS\n" : "validate: FAIL\n";
  return out;
}

}  // namespace bdsl::bitnet
