// NeoX RoPE on q (every head) and k (every KV head), and the KV-cache write of k and v at the
// token's position, in one dispatch. The position is read from the step-state buffer
// (ops/common/step_state.h), so the recorded graph replays for every token.
//
// KV cache: F16, two halves per u32 word (pack_half2x16: no 16-bit storage feature needed),
// layout [context, n_kv_heads * head_dim] per layer for k and for v. Why F16: attention streams
// the whole cache every token, and at the 2B shape near the end of the context (4096 positions x
// 640 values x 2 tensors x 30 layers) that is 315 MB in F16 against 630 MB in F32, i.e. as much as
// the ternary weights; its relative rounding (2^-11) is 16x finer than the int8 quantization
// (1/127 of the absmax) that the attention output goes through in the next projection, and it is
// what llama.cpp / bitnet.cpp keep by default. |k|, |v| stay far below the F16 range (65504).
//
// The rotations come from the host's table (numerics::rope_table): the CPU reference's (cos, sin)
// of pos * base^(-2i/head_dim), angle in double, so they are accurate at every position and the
// same bits as the reference's.
#pragma once
#include <cstdint>

#include "dsl/builder.h"
#include "ops/attention/attention_dims.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

// Bindings: step (read, u32: pos = position of token 0), rope_table (read, vec2 [context,
// head_dim / 2]: numerics::rope_table), q (read-write, f32 [n, n_heads*head_dim], rotated in place),
// k (read, f32 [n, n_kv_heads*head_dim]), v (read, same shape), k_cache (write, u32 [context,
// kv_words]), v_cache (write, u32 [context, kv_words]).
// Push: n (u32, tokens; 1 for decode). Token t is at position pos + t;
// positions at or past `context` are not written (the host stops before the cache is full).
// Grid: (ceil((n_heads + 2 * n_kv_heads) * head_dim / 4 / rope_kv_write_workgroup(target)), n).
dsl::Kernel rope_kv_write(const OpTarget& target, const AttentionDims& dims, uint32_t context);

uint32_t rope_kv_write_workgroup(const OpTarget& target);

// The same for many sequences in one dispatch (batched decode): token t is at the position and
// cache rows its record says (SequenceState, ops/common/step_state.h): binding `sequences` (read,
// u32 [n][4]) instead of step; its k and v go to row first_row + pos of k_cache and v_cache
// (every sequence's rows). `context`: the positions a sequence may have.
dsl::Kernel rope_kv_write_sequences(const OpTarget& target, const AttentionDims& dims, uint32_t context);

// Both with their grids (ops/plan.h); the count is the tokens.
Plan plan_rope_kv_write(const OpTarget& target, const AttentionDims& dims, uint32_t context);
Plan plan_rope_kv_write_sequences(const OpTarget& target, const AttentionDims& dims, uint32_t context);

}  // namespace bdsl::ops
