#include "models/bitnet/prefill_pipelines.h"

#include "ops/attention/attention_prefill.h"
#include "ops/common/embedding_lookup.h"
#include "ops/common/quantize_activations.h"
#include "ops/ternary/ternary_matmul.h"
#include "ops/ternary/ternary_matmul_coopmat.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bitnet {
namespace {

// A projection with whichever engine the target runs best (tensor cores where it lists an int8 shape).
PrefillProjection projection(rt::Context& ctx, codegen::ShaderCache& cache, const ops::OpTarget& t, uint32_t rows,
                             uint32_t cols, bool residual) {
  ops::MatmulOptions o;
  o.projection.add_residual = residual;
  ops::PrefillMatmul m = ops::ternary_matmul_auto(t, rows, cols, o);
  return {rt::make_pipeline(ctx, m.kernel, cache), m.row_groups, m.tokens_per_group};
}

bool separate_layout(const ops::OpTarget& t, PrefillProjections layout) {
  if (layout == PrefillProjections::Auto) return ops::ternary_matmul_coopmat_shape(t).has_value();
  return layout == PrefillProjections::Separate;
}

ops::QuantizeOptions ffn_sub_norm_quantize(bool separate) {
  ops::QuantizeOptions o;
  o.rms_norm = true;
  o.relu2_gate_up_input = separate;
  return o;
}

}  // namespace

PrefillPipelines::PrefillPipelines(rt::Context& ctx, const models::BitNetConfig& c, const ops::OpTarget& t,
                                   uint32_t rows_per_part, uint32_t parts,
                                   PrefillProjections layout, codegen::ShaderCache& cache)
    : tensor_cores(ops::ternary_matmul_coopmat_shape(t).has_value()),
      separate(separate_layout(t, layout)),
      attention_layout(ops::attention_prefill_layout(t, {c.n_heads, c.n_kv_heads, c.head_dim})),
      embedding(rt::make_pipeline(ctx, ops::embedding_lookup_batch(t, {c.dim, rows_per_part, parts}), cache)),
      norm_quantize(rt::make_pipeline(ctx, ops::quantize_activations(t, c.dim, {true}), cache)),
      norm_quantize_ffn(rt::make_pipeline(ctx, ops::quantize_activations(t, c.ffn_dim, ffn_sub_norm_quantize(separate)),
                                          cache)),
      attention(rt::make_pipeline(
          ctx, ops::attention_prefill(t, {c.n_heads, c.n_kv_heads, c.head_dim}, c.context_length, attention_layout), cache)),
      attn_output(projection(ctx, cache, t, c.dim, c.n_heads * c.head_dim, true)),
      ffn_down(projection(ctx, cache, t, c.dim, c.ffn_dim, true)) {
  if (c.n_heads * c.head_dim != c.dim)
    throw std::invalid_argument("prefill: attn_sub_norm is applied over dim, so n_heads * head_dim must equal dim");
  if (separate) {
    q_proj = projection(ctx, cache, t, c.n_heads * c.head_dim, c.dim, false);
    kv_proj = projection(ctx, cache, t, c.kv_dim(), c.dim, false);
    gate_up_proj = projection(ctx, cache, t, c.ffn_dim, c.dim, false);
  } else {
    qkv = rt::make_pipeline(ctx, ops::ternary_matmul_qkv(t, c.n_heads * c.head_dim, c.kv_dim(), c.kv_dim(), c.dim), cache);
    gate_up = rt::make_pipeline(ctx, ops::ternary_matmul_relu2_gate_up(t, c.ffn_dim, c.dim), cache);
  }
}

}  // namespace bdsl::bitnet
