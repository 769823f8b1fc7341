// Split-KV ("flash-decoding") attention over the F16 KV cache written by rope_kv_write: the
// kernel behind attention_decode and attention_prefill (they differ only in how many query
// tokens a dispatch serves). Internal to ops/; use those two.
//
// Workgroup (kv, c, t) takes the `group` query heads that share KV head kv, query token t, and
// chunk c of that token's positions 0..pos+t: the positions are cut into `chunks` equal chunks
// at run time, so the grid never depends on the position. It writes a partial (max score, sum of
// exp, unnormalised weighted V) per head, then counts itself done on an atomic counter per (t, kv);
// the last of the `chunks` workgroups to finish combines the partials and writes the output, and
// puts the counter back to zero for the next replay. One dispatch, one barrier-separated step:
// a separate combine dispatch would cost another ~2.2 us per layer on the H100 (66 us a token
// over 30 layers). Partials travel through atomics (exchange to write, add 0 to read) because the
// DSL has no `coherent` buffers: plain loads could miss another workgroup's stores. Each partial
// is read by one invocation only (atomics on one address from many invocations serialise: 57 us).
//
// Inside a workgroup: scores one invocation per position (the key row read whole), softmax
// statistics one subgroup per query head, weighted V one invocation per (slice of positions, word
// of the row) unrolled by 8, partials reduced through shared memory.
// Measured on the H100 at the 2B shape (20/5 heads, head_dim 128, context 4096, 32 chunks), GPU
// time per dispatch from timestamps (an rms_norm of 2560 reads ~6.5 us the same way): 14.5 us at
// pos 100, 18 us at pos 1000, 27 us at pos 4095 (16 chunks: 26.5; 8: 41; 4: 71). The fixed part
// is a chain of dependent latencies (step, scores, V, partials, counter, statistics, outputs);
// cutting it (e.g. a combine by subgroups, fewer barriers) is the next step.
#pragma once
#include <cstdint>
#include <string>

#include "dsl/builder.h"
#include "ops/attention_dims.h"
#include "ops/target.h"

namespace bdsl::ops {

// Bindings: step (read, u32: pos), q (read, f32 [tokens, n_heads*head_dim]),
// k_cache, v_cache (read, u32 [context, kv_words]), partials (read-write, u32
// [tokens * n_heads * chunks * (head_dim + 2)], scratch), counters (read-write, u32
// [tokens * n_kv_heads], zero before the first dispatch; left zero by every dispatch),
// out (write, f32 [tokens, n_heads*head_dim]). Push: n (u32) when `batch`, none otherwise.
// Grid: (n_kv_heads, chunks, tokens).
dsl::Kernel attention_split_kv(const std::string& name, const OpTarget& target, const AttentionDims& dims,
                               uint32_t context, uint32_t chunks, bool batch);

uint32_t attention_workgroup(const OpTarget& target, const AttentionDims& dims);
// A chunk count that fills a large GPU at the longest context and keeps the chunk's scores in
// shared memory.
uint32_t attention_chunks(const OpTarget& target, const AttentionDims& dims, uint32_t context);
// Bytes of the two scratch buffers for `tokens` query tokens.
uint64_t attention_partials_bytes(const AttentionDims& dims, uint32_t chunks, uint32_t tokens);
uint64_t attention_counters_bytes(const AttentionDims& dims, uint32_t tokens);

}  // namespace bdsl::ops
