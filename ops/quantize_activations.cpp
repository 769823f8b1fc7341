#include "ops/quantize_activations.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/matrix_support.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

// 256 invocations: on an H100, 1024 was slower (7.7 us vs 6.2 us per barrier-separated
// dispatch for dim 2560), the extra subgroup partials outweighing the shorter passes.
uint32_t quantize_activations_workgroup(const OpTarget& target, const QuantizeOptions& options) {
  if (options.workgroup == 0) return subgroup_multiple_workgroup(target, 256);
  if (options.workgroup > target.max_workgroup_invocations || options.workgroup % std::max(1u, target.subgroup_size) != 0)
    throw std::invalid_argument("quantize_activations: workgroup " + std::to_string(options.workgroup) +
                                " is not whole subgroups within the device's limit");
  return options.workgroup;
}

QuantizedTotals emit_quantize_activations(KernelBuilder& k, const QuantizeBody& b) {
  const uint32_t w = b.workgroup;
  auto lid = k.local_index();
  const bool norm = static_cast<bool>(b.load_norm_weight);

  std::optional<Expr<f32>> inv_rms;
  if (norm) {
    auto sq_scratch = k.shared<f32>("sum_sq_parts", w);
    auto sum_sq = k.var<f32>("sum_sq", 0.0f);
    for_range(lid, b.dim, w, [&](Expr<u32> i) {
      auto v = let("xv", b.load_x(i));
      sum_sq += v * v;
    }, "i");
    auto total = workgroup_add<f32>(k, sq_scratch, Expr<f32>(sum_sq), "total_sq");
    // As golden::rms_norm: mean = sum / n, inv = 1 / sqrt(mean + eps), x * inv * w.
    inv_rms = let("inv_rms", 1.0f / sqrt(total / static_cast<float>(b.dim) + *b.eps));
  }
  auto value = [&](Expr<u32> i) -> Expr<f32> {
    return norm ? (b.load_x(i) * *inv_rms) * b.load_norm_weight(i) : b.load_x(i);
  };

  auto max_scratch = k.shared<f32>("absmax_parts", w);
  auto local_max = k.var<f32>("local_absmax", 0.0f);
  for_range(lid, b.dim, w, [&](Expr<u32> i) { local_max = max(local_max, abs(value(i))); }, "i");
  auto absmax = workgroup_max<f32>(k, max_scratch, Expr<f32>(local_max), "absmax");
  // Exactly golden's 127 / max(absmax, 1e-5) on every device (see divide_correctly_rounded).
  auto scale = let("act_scale", divide_correctly_rounded(k, constant<f32>(127.0f), max(absmax, 1e-5f)));

  auto sum_scratch = k.shared<i32>("q_sum_parts", w);
  auto local_sum = k.var<i32>("local_q_sum", 0);
  for_range(lid, b.dim / 4, w, [&](Expr<u32> word) {
    auto base = word * 4u;
    auto q_of = [&](uint32_t j) {
      auto v = let("v" + std::to_string(j), value(base + j));
      if (b.store_normalized) b.store_normalized(base + j, v);
      return let("q" + std::to_string(j), cast<i32>(clamp(round(v * scale), -128.0f, 127.0f)));
    };
    auto q0 = q_of(0), q1 = q_of(1), q2 = q_of(2), q3 = q_of(3);
    local_sum += (q0 + q1) + (q2 + q3);
    b.store_q(word, pack_i8x4(make_vec<i32>(q0, q1, q2, q3)));
  }, "word");
  auto sum = workgroup_add<i32>(k, sum_scratch, Expr<i32>(local_sum), "q_sum");
  return {scale, sum};
}

Kernel quantize_activations(const OpTarget& target, uint32_t dim, QuantizeOptions options) {
  if (dim == 0 || dim % 4 != 0)
    throw std::invalid_argument("quantize_activations: dim " + std::to_string(dim) + " is not a multiple of 4");
  const uint32_t w = quantize_activations_workgroup(target, options);
  std::string name = options.rms_norm ? "rms_norm_quantize_activations" : "quantize_activations";
  if (options.relu2_gate_up_input) name += "_relu2_gate_up";
  if (options.write_normalized) name += "_normalized";
  KernelBuilder k(name + "_" + std::to_string(dim), {w, 1, 1});
  std::vector<Buffer<f32>> inputs;  // x, or gate and up
  for (const char* input : options.relu2_gate_up_input ? std::vector{"gate", "up"} : std::vector{"x"})
    inputs.push_back(k.buffer<f32>(input, Access::Read));
  std::optional<Buffer<f32>> norm_weight;
  if (options.rms_norm) norm_weight = k.buffer<f32>("norm_weight", Access::Read);
  auto q = k.buffer<u32>("q", Access::Write);
  auto act = k.buffer<u32>("act", Access::Write);
  std::optional<Buffer<f32>> normalized;
  if (options.write_normalized) normalized = k.buffer<f32>("normalized", Access::Write);
  std::optional<Expr<f32>> eps;
  if (options.rms_norm) eps = k.push<f32>("eps");

  auto token = k.workgroup_id().x();
  auto x_base = let("x_base", token * dim);
  auto q_base = let("q_base", token * (dim / 4));
  QuantizeBody body;
  body.dim = dim;
  body.workgroup = w;
  if (options.relu2_gate_up_input) {
    body.load_x = [&](Expr<u32> i) {
      auto g = let("gate_relu", max(Expr<f32>(inputs[0][x_base + i]), 0.0f));
      return (g * g) * Expr<f32>(inputs[1][x_base + i]);  // as golden::relu2_gate: (g * g) * up
    };
  } else {
    body.load_x = [&](Expr<u32> i) { return Expr<f32>(inputs[0][x_base + i]); };
  }
  if (norm_weight) body.load_norm_weight = [&](Expr<u32> i) { return Expr<f32>((*norm_weight)[i]); };
  body.eps = eps;
  body.store_q = [&](Expr<u32> word, Expr<u32> packed) { q[q_base + word] = packed; };
  if (normalized) body.store_normalized = [&](Expr<u32> i, Expr<f32> v) { (*normalized)[x_base + i] = v; };
  const QuantizedTotals totals = emit_quantize_activations(k, body);
  if_(k.local_index() == 0u, [&] {
    act[token * 2u] = bitcast<u32>(totals.scale);
    act[token * 2u + 1u] = bitcast<u32>(totals.sum);
  });
  return k.build();
}

}  // namespace bdsl::ops
