// The pipelines of the batched prompt path (prefill): every projection as a matrix-matrix product
// over a block of tokens (each weight load serves a tile of tokens), RMSNorm + int8 quantization
// per token, RoPE + KV write and causal attention over the block.
#pragma once
#include "codegen/shader_cache.h"
#include "models/bitnet_config.h"
#include "ops/attention_dims.h"
#include "ops/target.h"
#include "runtime/context.h"
#include "runtime/pipeline.h"

namespace bdsl::bitnet {

struct PrefillPipelines {
  PrefillPipelines(rt::Context& ctx, const models::BitNetConfig& config, const ops::OpTarget& target,
                   uint32_t attention_chunks, uint32_t rows_per_part, uint32_t parts,
                   codegen::ShaderCache& cache = codegen::default_shader_cache());

  // Grids of the two single-tensor projections (they differ between the two engines). Declared
  // first: the constructor fills them while it builds those pipelines below.
  uint32_t attn_output_row_groups = 0, ffn_down_row_groups = 0, tokens_per_group = 0;
  bool tensor_cores = false;

  rt::Pipeline embedding;       // token ids -> rows of the F16 table
  rt::Pipeline norm_quantize;   // RMSNorm + int8, over dim (attn_norm, ffn_norm, attn_sub_norm)
  rt::Pipeline norm_quantize_ffn;  // over ffn_dim (ffn_sub_norm)
  rt::Pipeline qkv;
  rt::Pipeline attention;       // causal, block of tokens against the cache
  rt::Pipeline attn_output;     // residual added; tensor cores where the device has them
  rt::Pipeline gate_up;         // relu(gate)^2 * up
  rt::Pipeline ffn_down;        // residual added; tensor cores where the device has them
};

}  // namespace bdsl::bitnet
