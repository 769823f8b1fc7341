#include "models/gpu/prefill_pipelines.h"

#include "ops/attention_prefill.h"
#include "ops/embedding_lookup.h"
#include "ops/quantize_activations.h"
#include "ops/ternary_matmul.h"
#include "ops/ternary_matmul_coopmat.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bitnet {
namespace {

ops::MatmulOptions with_residual(bool residual) {
  ops::MatmulOptions o;
  o.projection.add_residual = residual;
  return o;
}

// Builds a residual projection with whichever engine the target runs best, keeping its grid.
rt::Pipeline residual_projection(rt::Context& ctx, codegen::ShaderCache& cache, const ops::OpTarget& t,
                                 uint32_t rows, uint32_t cols, uint32_t& row_groups, uint32_t& tokens_per_group,
                                 bool& tensor_cores) {
  const ops::PrefillMatmul m = ops::ternary_matmul_auto(t, rows, cols, with_residual(true));
  row_groups = m.row_groups;
  tokens_per_group = m.tokens_per_group;
  tensor_cores = m.cooperative;
  return rt::make_pipeline(ctx, m.kernel, cache);
}

}  // namespace

PrefillPipelines::PrefillPipelines(rt::Context& ctx, const models::BitNetConfig& c, const ops::OpTarget& t,
                                   uint32_t chunks, uint32_t rows_per_part, uint32_t parts,
                                   codegen::ShaderCache& cache)
    : embedding(rt::make_pipeline(ctx, ops::embedding_lookup_batch(t, {c.dim, rows_per_part, parts}), cache)),
      norm_quantize(rt::make_pipeline(ctx, ops::quantize_activations(t, c.dim, {true}), cache)),
      norm_quantize_ffn(rt::make_pipeline(ctx, ops::quantize_activations(t, c.ffn_dim, {true}), cache)),
      qkv(rt::make_pipeline(ctx, ops::ternary_matmul_qkv(t, c.n_heads * c.head_dim, c.kv_dim(), c.kv_dim(), c.dim),
                            cache)),
      attention(rt::make_pipeline(
          ctx, ops::attention_prefill(t, {c.n_heads, c.n_kv_heads, c.head_dim}, c.context_length, chunks), cache)),
      attn_output(residual_projection(ctx, cache, t, c.dim, c.n_heads * c.head_dim, attn_output_row_groups,
                                      tokens_per_group, tensor_cores)),
      gate_up(rt::make_pipeline(ctx, ops::ternary_matmul_relu2_gate_up(t, c.ffn_dim, c.dim), cache)),
      ffn_down(residual_projection(ctx, cache, t, c.dim, c.ffn_dim, ffn_down_row_groups, tokens_per_group,
                                   tensor_cores)) {
  if (c.n_heads * c.head_dim != c.dim)
    throw std::invalid_argument("prefill: attn_sub_norm is applied over dim, so n_heads * head_dim must equal dim");
}

}  // namespace bdsl::bitnet
