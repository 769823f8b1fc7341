#include "ops/attention/attention_output_quantize.h"

#include <stdexcept>
#include <string>

#include "ops/attention/attention_split_kv.h"
#include "ops/common/norm_scale.h"
#include "ops/common/quantize_activations.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

Kernel attention_output_quantize(const OpTarget& target, const AttentionPartialsInput& a, bool rms_norm) {
  a.dims.check("attention_output_quantize");
  const uint32_t dim = a.dims.q_width();
  const QuantizeOptions standalone{rms_norm};
  const uint32_t w = quantize_activations_workgroup(target, standalone);  // the standalone kernel's: its bits
  // The staged copy of x (QuantizeBody::stride_order_squares) and three reductions' scratch.
  if (4ull * dim + 3ull * 4 * w > target.max_shared_bytes)
    throw std::invalid_argument("attention_output_quantize: " + std::to_string(dim) + " floats of attention's output and the "
                                "reduction scratch do not fit in " + std::to_string(target.max_shared_bytes) +
                                " bytes of shared memory");
  KernelBuilder k(std::string(rms_norm ? "rms_norm_" : "") + "quantize_attention_output_" + std::to_string(dim), {w, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  std::optional<Buffer<f32>> norm_weight;
  if (rms_norm) norm_weight = k.buffer<f32>("norm_weight", Access::Read);
  auto q = k.buffer<u32>("q", Access::Write);
  auto act = k.buffer<u32>("act", Access::Write);
  auto step = k.buffer<u32>("attention_step", Access::Read);
  auto partials = k.buffer<vec2>("attention_partials", Access::Read);
  std::optional<Expr<f32>> eps;
  if (rms_norm) eps = k.push<f32>("eps");

  auto token = k.workgroup_id().x();
  auto x_base = let("x_base", token * dim);
  QuantizeBody body;
  body.dim = dim;
  body.workgroup = w;
  body.load_x = [&](Expr<u32> i) { return Expr<f32>(x[x_base + i]); };
  body.load_word = attention_word_loader(k, a, x, step, partials, std::nullopt, token, w, token);
  body.stride_order_squares = true;
  if (norm_weight) body.load_norm_weight = [&](Expr<u32> i) { return Expr<f32>((*norm_weight)[i]); };
  body.eps = eps;
  body.norm_scale = norm_scale_mode(target, body.workgroup);
  emit_token_quantize(k, body, q, act, token);
  return k.build();
}

Plan plan_attention_output_quantize(const OpTarget& target, const AttentionPartialsInput& a, bool rms_norm) {
  return {attention_output_quantize(target, a, rms_norm), [](uint32_t tokens) { return rt::Grid{tokens}; }};
}

}  // namespace bdsl::ops
