#include "models/gpu/bitnet_pipelines.h"

#include "ops/attention_decode.h"
#include "ops/attention_split_kv.h"
#include "ops/embedding_lookup.h"
#include "ops/rms_norm.h"
#include "ops/rope_kv_write.h"
#include "ops/ternary_matvec.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bitnet {
namespace {

ops::MatvecOptions normalized(bool add_residual) {
  ops::MatvecOptions o;
  o.input = ops::MatvecInput::NormalizeInWorkgroup;
  o.add_residual = add_residual;
  return o;
}

}  // namespace

BitNetPipelines::BitNetPipelines(rt::Context& ctx, const models::BitNetConfig& c, uint32_t k)
    : target(ops::OpTarget::from(ctx.info())),
      dims{c.n_heads, c.n_kv_heads, c.head_dim},
      split(ops::lm_head_split(target, c.vocab_size, c.dim)),
      argmax_plan(ops::argmax_plan(target, c.vocab_size)),
      top_k_plan(ops::top_k_plan(target, c.vocab_size, k)),
      top_k(k),
      attention_chunks(ops::attention_chunks(target, dims, c.context_length)),
      embedding(rt::make_pipeline(ctx, ops::embedding_lookup(target, {c.dim, split.rows_per_part, split.parts}))),
      qkv(rt::make_pipeline(ctx, ops::ternary_matvec_qkv(target, dims.q_width(), dims.kv_width(), dims.kv_width(),
                                                         c.dim, normalized(false)))),
      rope_kv(rt::make_pipeline(ctx, ops::rope_kv_write(target, dims, c.context_length))),
      attention(rt::make_pipeline(ctx, ops::attention_decode(target, dims, c.context_length, attention_chunks))),
      attn_output(rt::make_pipeline(ctx, ops::ternary_matvec(target, c.dim, dims.q_width(), normalized(true)))),
      gate_up(rt::make_pipeline(ctx, ops::ternary_matvec_relu2_gate_up(target, c.ffn_dim, c.dim, normalized(false)))),
      ffn_down(rt::make_pipeline(ctx, ops::ternary_matvec(target, c.dim, c.ffn_dim, normalized(true)))),
      output_norm(rt::make_pipeline(ctx, ops::rms_norm(target, c.dim))),
      lm_head(rt::make_pipeline(ctx, ops::lm_head(target, c.vocab_size, c.dim))),
      argmax_partial(rt::make_pipeline(ctx, ops::argmax_partial(target, c.vocab_size))),
      argmax_final(rt::make_pipeline(ctx, ops::argmax_final(target, c.vocab_size))),
      top_k_partial(rt::make_pipeline(ctx, ops::top_k_partial(target, c.vocab_size, k))),
      top_k_merge(rt::make_pipeline(ctx, ops::top_k_merge(target, c.vocab_size, k))) {}

}  // namespace bdsl::bitnet
