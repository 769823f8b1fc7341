// RMSNorm + int8 of batched decode attention's output where attention leaves its chunks' combine
// to the consumer (SplitKvTuning::defer_combine): each token's words read from attention's out
// where it wrote them, or merged from its partials (attention_word_loader), then quantized as
// quantize_activations does, sum of squares in its stride order: the same bits as attention
// combining in the kernel followed by quantize_activations. The attn_sub_norm step of the
// batch's buckets whose projections read quantized input.
// Bindings: x (f32 read, [tokens, q_width]: attention's out), norm_weight (f32 read, with
// rms_norm), q (u32 write: packed int8), act (u32 write: scale bits, sum of q), attention_step
// (u32 read: the sequence records, ops/common/step_state.h), attention_partials (vec2 read).
// Push: eps (f32, with rms_norm). Grid: (tokens).
#pragma once
#include "ops/plan.h"
#include "ops/target.h"
#include "ops/ternary/ternary_matvec.h"

namespace bdsl::ops {

dsl::Kernel attention_output_quantize(const OpTarget& target, const AttentionPartialsInput& attention, bool rms_norm);
Plan plan_attention_output_quantize(const OpTarget& target, const AttentionPartialsInput& attention, bool rms_norm);

}  // namespace bdsl::ops
