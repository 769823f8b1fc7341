// Attention of one query token (all heads, GQA) over the F16 KV cache positions 0..pos, pos read
// from the step-state buffer: scores scaled by 1/sqrt(head_dim), softmax in fp32 (max-subtracted,
// per chunk, then rescaled when chunks combine). The sequence is split into chunks
// (flash-decoding), as many as pos needs up to a fixed grid, and the last workgroup to finish
// combines them (atomic counter), so the grid does not depend on pos and decode attention is one
// barrier-separated step; see ops/attention/attention_split_kv.h for the scheme and why it is not a second
// dispatch. With defer_combine, the combine of 2..defer_combine chunks is left to the next kernel
// (ternary_matvec.h, MatvecOptions::attention_partials), which then reads the partials.
#pragma once
#include <cstdint>

#include "dsl/builder.h"
#include "ops/attention/attention_dims.h"
#include "ops/attention/attention_split_kv.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

// Bindings: step (read, u32), q (read, f32 [n_heads*head_dim], after RoPE), k_cache, v_cache
// (read, u32 [context, n_kv_heads*head_dim/2]: F16 pairs), partials (read-write, u32,
// attention_partials_bytes(dims, chunks, 1)), counters (read-write, u32 [n_kv_heads], zeroed once
// before the first dispatch), out (write, f32 [n_heads*head_dim]). Push: none.
// Grid: (n_kv_heads, chunks, 1) workgroups of attention_workgroup(target, dims) invocations;
// chunks from attention_chunks(target, dims, context) unless you have a reason.
// tuning: every knob (ops/attention/attention_split_kv.h); the grid's x is then n_kv_heads *
// tuning.head_split, and out is not written for 1 < active <= tuning.defer_combine (a consumer
// of the deferred partials needs attention_pass(target, dims, tuning)).
dsl::Kernel attention_decode(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                             const SplitKvTuning& tuning = {});

// Decode of many sequences in one dispatch (batched decode): token t of the grid is the next token
// of its own sequence, at the position and cache rows its record says (SequenceState,
// ops/common/step_state.h). Bindings: sequences (read, u32 [tokens][4]), q (read, f32 [tokens,
// n_heads*head_dim], after RoPE), k_cache, v_cache (read, u32 [rows, kv_words]: every sequence's
// rows, token t's positions 0..pos at rows first_row..first_row + pos), partials (read-write,
// attention_partials_bytes(dims, chunks, tokens)), counters (read-write, u32 [tokens *
// n_kv_heads], zeroed once), out (write, f32 [tokens, n_heads*head_dim]). Push: n (u32, tokens).
// Grid: (n_kv_heads * tuning.head_split, attention_chunk_workgroups(chunks, tuning), tokens). `context`: the positions a sequence
// may have. With tuning.defer_combine, a token's out is not written for 1 < active <=
// defer_combine: its consumer merges the partials (attention_word_loader with a token: attn_output
// in tiles of one token, MatvecOptions::attention_partials, or attention_output_quantize).
// one_sequence: steps of one sequence only (grid z 1, the push constant unread); much faster code
// for a batch of one than indexing by z (attention_split_kv.h).
dsl::Kernel attention_decode_sequences(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                                       const SplitKvTuning& tuning = {}, bool one_sequence = false);

// Both with their grids (ops/plan.h); the sequences' count is the tokens.
Plan plan_attention_decode(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                           const SplitKvTuning& tuning = {});
Plan plan_attention_decode_sequences(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                                     const SplitKvTuning& tuning = {}, bool one_sequence = false);

}  // namespace bdsl::ops
