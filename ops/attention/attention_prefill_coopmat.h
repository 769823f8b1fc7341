// Causal prefill attention on tensor cores (F16 x F16 -> F32 cooperative matrices, 16x16x16):
// attention_prefill's result (same bindings, same causal rule) where the device lists that shape,
// for long blocks (attention_prefill_coopmat_pays).
//
// Workgroup (kv and chunk, tile): 16 query tokens x the `group` query heads of KV head kv, a
// subgroup per head, or two (ops/tuning.h's prefill_coopmat_attention_subgroups_per_head, where
// head_dim's 16-wide blocks divide between them): each of a head's two takes half of every K/V
// tile's keys in the scores and the softmax steps and half of head_dim in p x V, and the first
// pass's max and sum of each row are combined over them through shared memory. Two passes over its
// chunk of the positions the tile needs, 32 at a time through shared memory:
// the first takes each query row's max and sum of exp(score - max) (online, two scalars a row);
// the second turns the scores into the softmax weights p = exp(score - max) / sum as the
// reference does, and multiplies them by V. q is F16 already (rope_kv_write rounds it, as
// bitnet.cpp multiplies it), so q x K^T on F16 tensor cores is the exact products summed in f32.
// p stays f32 in bitnet.cpp's batched P x V: it goes in as two F16 matrices, hi = f16(p) and
// lo = f16(p - hi) (p scaled by 2^10 first, so that lo stays a normal F16 number), whose products
// with V sum to p x V within ~2^-22 of p. With ops/tuning.h's
// prefill_coopmat_attention_lean_weights, p = exp(score - max) * (2^10 / sum) (a multiply, not
// a division) and hi = p truncated to F16's 10 mantissa bits (an AND, not a rounding): then lo <
// 2^-10 p, and hi + f16(lo) is within 2^-21 of p.
// CPU twin: golden::attention (the same tolerance as attention_prefill's tests).
#pragma once
#include <array>
#include <cstdint>

#include "dsl/builder.h"
#include "ops/attention/attention_dims.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

// Whether the target runs it for these dims: the F16 16x16x16 shape, subgroups of 32, head_dim a
// multiple of 16, a subgroup per query head of a KV head within the workgroup limit, and its
// shared memory (~37 KB at the 2B shape; more with more query heads per KV head or a longer
// head_dim) within the target's.
bool attention_prefill_coopmat_supported(const OpTarget& target, const AttentionDims& dims);
// Whether a block of n tokens from position pos is better served by it than by
// attention_prefill (ops/tuning.h): late enough, and enough token tiles to fill the GPU without
// attention_prefill's position chunks.
bool attention_prefill_coopmat_pays(const OpTarget& target, const AttentionDims& dims, uint32_t n, uint32_t pos);

// Bindings: step (u32 read: pos), q (f32 [n, n_heads*head_dim] read, F16 values), k_cache,
// v_cache (u32 [context, kv_words] read), partials (f32 read-write, scratch of
// attention_prefill_coopmat_partials_bytes), counters (u32 read-write,
// attention_prefill_coopmat_counters_bytes, zero before the first dispatch; left zero by every
// dispatch), out (f32 [n, n_heads*head_dim] write). Push: n (u32). Grid:
// attention_prefill_coopmat_grid(target, dims, n, chunks). Throws std::invalid_argument where unsupported.
//
// Position chunks: the grid's x is n_kv_heads x chunks. Each token tile's K/V tiles are cut into
// up to `chunks` runs (as many as its positions need, at run time); each workgroup takes both
// passes over its run and writes that run's normalised p x V with its max and sum, and the last
// of a tile's workgroups to finish merges them (an atomic count, as attention_prefill does). One
// chunk is the kernel without a merge. Chunks give the GPU more workgroups; they pay late in a
// long context, not early (bench/RESULTS.md run 38: the kernel is not bound by its longest
// tile's chain of steps).
dsl::Kernel attention_prefill_coopmat(const OpTarget& target, const AttentionDims& dims, uint32_t context);
// The grid's chunks for a block of n tokens from position pos: its last token tile's K/V tiles
// ((pos + n) / 32) over ops/tuning.h's prefill_coopmat_attention_chunk_tiles, at most 16; 1 where
// that is 0. A block's recording takes the grid of its position's chunks.
uint32_t attention_prefill_coopmat_chunks(const OpTarget& target, uint32_t n, uint32_t pos);
// chunks 0: attention_prefill_coopmat_chunks's at position 0; any chunks >= 1 works with partials
// sized for it.
std::array<uint32_t, 3> attention_prefill_coopmat_grid(const OpTarget& target, const AttentionDims& dims, uint32_t n,
                                                       uint32_t chunks = 0);
uint64_t attention_prefill_coopmat_partials_bytes(const AttentionDims& dims, uint32_t n, uint32_t chunks);
uint64_t attention_prefill_coopmat_counters_bytes(const AttentionDims& dims, uint32_t n);
Plan plan_attention_prefill_coopmat(const OpTarget& target, const AttentionDims& dims, uint32_t context);

}  // namespace bdsl::ops
