// llama.cpp's repeat penalty on the device, before any choice reads the logits: each distinct
// token among the last `last_n` tokens of the sequence (the one being decoded included) has its
// logit l made l * inverse_penalty where l > 0, else l * penalty (llama.cpp divides: the host
// passes 1 / penalty so that device and host twin, models::apply_repeat_penalty, round alike).
//
// repeat_penalty(vocab, context): one workgroup.
//   bindings  0 logits   f32 read-write [vocab]
//             1 step     u32 read [4]   (ops/common/step_state.h: the token and its position)
//             2 history  u32 read-write [context]: history[q] = the token at position q; this
//                        dispatch writes history[pos] = token (positions before, the caller)
//   parameters (graph parameters, KernelBuilder::param): penalty f32, inverse_penalty f32,
//             last_n u32 (at most kMaxRepeatLastN; 0: nothing)
//   grid (1, 1, 1).
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

inline constexpr uint32_t kMaxRepeatLastN = 1024;

dsl::Kernel repeat_penalty(const OpTarget& target, uint32_t vocab, uint32_t context);
Plan plan_repeat_penalty(const OpTarget& target, uint32_t vocab, uint32_t context);

}  // namespace bdsl::ops
