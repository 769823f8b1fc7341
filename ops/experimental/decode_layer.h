// The decode projections from attention's output to the next layer's attention, as one dispatch:
// attn_output (+ residual), gate/up (relu² product), ffn_down (+ residual) and, unless this is the
// last layer, the next layer's QKV with RoPE and the KV-cache write. Each is a range of the
// grid's workgroups running the same code as its standalone kernel (ternary_matvec.h); a phase
// loads its weights, then waits for the phase before it through a counter (ops/experimental/phase_sync.h)
// instead of a pipeline barrier: three or four handoffs cheaper than barriers (bench
// `grid_sync/`), and the weight loads overlap the wait.
//
// Bindings, in order: step (u32 read: the step state), counters (u32 read-write: PhaseSync's),
// then each phase's bindings as its standalone kernel declares them (from_ffn_down: ffn_down's
// and qkv's only):
//   attn_output: w, x (attention out), norm_weight (attn_sub_norm), y (the residual stream)
//   gate_up:     w_gate, w_up, x (the residual stream), norm_weight (ffn_norm), y (ffn)
//   ffn_down:    w, x (ffn), norm_weight (ffn_sub_norm), y (the residual stream)
//   qkv:         w_q, w_k, w_v, x (the residual stream), norm_weight (next attn_norm),
//                rope_table, y_q, k_cache, v_cache (the next layer's)
// Push constants: eps (f32), phase_base (u32: the word of this
// dispatch's first counter; its phases use phase_base + kPhaseCounterStride * p).
// Grid: (decode_layer_workgroups(...), 1, 1).
#pragma once
#include <cstdint>

#include "dsl/builder.h"
#include "ops/attention/attention_dims.h"
#include "ops/plan.h"
#include "ops/target.h"
#include "ops/ternary/ternary_matvec.h"

namespace bdsl::ops {

struct DecodeLayerShape {
  AttentionDims dims;
  uint32_t dim = 0, ffn = 0, context = 0;
  bool next_qkv = true;       // false for the last layer
  bool from_ffn_down = false;  // only ffn_down and the next QKV (attn_output, gate/up on their own);
                               // without next_qkv, ffn_down alone (to compare its registers)
};

// The standalone kernels' options (the norm fused in front of every phase); all must share one
// workgroup size.
struct DecodeLayerOptions {
  MatvecOptions residual, gate_up, qkv;
  bool memory_model = false;  // handoffs through the Vulkan memory model, not coherent buffers (phase_sync.h)
};

dsl::Kernel decode_layer(const OpTarget& target, const DecodeLayerShape& shape, const DecodeLayerOptions& options,
                         uint32_t spin_limit = 0);  // 0: kPhaseSpinLimit
uint32_t decode_layer_workgroups(const OpTarget& target, const DecodeLayerShape& shape, const DecodeLayerOptions& options);
Plan plan_decode_layer(const OpTarget& target, const DecodeLayerShape& shape, const DecodeLayerOptions& options,
                       uint32_t spin_limit = 0);  // ops/plan.h
// Counter words one dispatch uses, from its phase_base.
uint32_t decode_layer_counter_words();
// Shared memory of the kernel: every phase's arrays side by side.
bool decode_layer_fits(const OpTarget& target, const DecodeLayerShape& shape, const DecodeLayerOptions& options);

}  // namespace bdsl::ops
