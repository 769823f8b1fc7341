// The pipelines of the batched prompt path (prefill): every projection as a matrix-matrix product
// over a block of tokens (each weight load serves a tile of tokens), RMSNorm + int8 quantization
// per token, RoPE + KV write and causal attention over the block.
//
// QKV and gate/up run in one of two layouts. Fused: one subgroup-matmul dispatch for Q, K and V
// and one for gate and up (relu(gate)^2 * up in its epilogue). Separate: one dispatch per tensor,
// so each can run on tensor cores (ternary_matmul_auto); the dispatches of a step share no
// written buffer, so they run with no barrier between them, and ffn_sub_norm's quantize reads
// gate and up and forms relu(gate)^2 * up itself.
#pragma once
#include <optional>

#include "codegen/shader_cache.h"
#include "models/bitnet_config.h"
#include "ops/attention/attention_dims.h"
#include "ops/attention/attention_prefill.h"
#include "ops/target.h"
#include "runtime/context.h"
#include "runtime/graph.h"
#include "runtime/pipeline.h"

namespace bdsl::bitnet {

// Auto: Separate where the device has int8 tensor cores, else Fused (the subgroup matmul is
// faster fused: the activations are read once for all the tensors).
enum class PrefillProjections { Auto, Fused, Separate };

// A single-tensor projection and its grid, whichever engine runs it.
struct PrefillProjection {
  rt::Pipeline pipeline;
  uint32_t row_groups = 0, tokens_per_group = 0;
  rt::Grid grid(uint32_t tokens) const { return {row_groups, (tokens + tokens_per_group - 1) / tokens_per_group}; }
};

struct PrefillPipelines {
  PrefillPipelines(rt::Context& ctx, const models::BitNetConfig& config, const ops::OpTarget& target,
                   uint32_t rows_per_part, uint32_t parts,
                   PrefillProjections layout = PrefillProjections::Auto,
                   codegen::ShaderCache& cache = codegen::default_shader_cache());

  bool tensor_cores = false;  // the single-tensor projections run on tensor cores
  bool separate = false;      // the layout chosen (Separate)
  ops::PrefillAttentionLayout attention_layout;  // how `attention` tiles a block (sets its grid)

  rt::Pipeline embedding;       // token ids -> rows of the F16 table
  rt::Pipeline norm_quantize;   // RMSNorm + int8, over dim (attn_norm, ffn_norm, attn_sub_norm)
  rt::Pipeline norm_quantize_ffn;  // over ffn_dim (ffn_sub_norm); Separate: reads gate and up
  std::optional<rt::Pipeline> qkv, gate_up;  // Fused
  // Separate: Q; K and V (one shape); gate and up (one shape).
  std::optional<PrefillProjection> q_proj, kv_proj, gate_up_proj;
  rt::Pipeline attention;       // causal, block of tokens against the cache
  PrefillProjection attn_output;  // residual added
  PrefillProjection ffn_down;     // residual added
};

}  // namespace bdsl::bitnet
