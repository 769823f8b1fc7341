// Causal attention for a block of n new query tokens at positions pos..pos+n-1 (pos read from the
// step-state buffer) against the F16 KV cache, which already holds the block's own K/V
// (rope_kv_write with n tokens): token t attends to positions 0..pos+t.
//
// Tiled ("flash attention" on plain f32 FMA): workgroup (kv, tile) takes a tile of query tokens
// times the `group` query heads that share KV head kv, and streams that head's K/V positions
// through shared memory in tiles, each read once for every query row of the tile; tiles past the
// tile's causal limit are never read. Per query row an online softmax (running max m and sum l),
// f32 throughout, scores scaled by 1/sqrt(head_dim) as in the reference; each K/V tile's weights
// are normalised by the tile's sum before they multiply V, as the reference normalises by its sum
// (the tiny model's golden test sits an ulp from an int8 rounding boundary), and the tile's
// average merges into the running one.
//
// Inside a workgroup, `lanes` invocations of one subgroup serve one query token (all its heads):
// for scores, lane j takes keys j, j + lanes, ... of the K tile (its query rows from shared
// memory), the row's max and sum go round the lanes by a shuffle butterfly, and the weights go to
// shared memory; for P x V, lane j owns 4-dim slices j, j + lanes, ... of every head's output, so
// each lane keeps its token's m, l and rescale factors in registers. Three barriers per K/V tile.
// The token tiles are handed out last first: the longest (most positions) start first.
//
// A block of few token tiles (a short prompt late in the context) would run on few workgroups:
// the grid's z cuts each tile's positions into up to that many chunks of whole K/V tiles (as many
// as the positions need, chosen at run time), and the last chunk's workgroup to finish merges
// the partials (atomic count, as attention_split_kv does). A 512-token block takes one chunk.
//
// Why this shape: the alternatives it was measured against are in bench/RESULTS.md, "Behind the code".
#pragma once
#include <array>
#include <cstdint>

#include "dsl/builder.h"
#include "ops/attention/attention_dims.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

// How the kernel tiles its work (attention_prefill_layout picks one for a target).
struct PrefillAttentionLayout {
  uint32_t lanes = 16;         // invocations per query token (a power of two, <= subgroup size)
  uint32_t keys_per_lane = 2;  // positions per lane in a K/V tile: tile = lanes * keys_per_lane
  uint32_t tokens = 8;         // query tokens per workgroup: workgroup = tokens * lanes

  uint32_t workgroup() const { return tokens * lanes; }
  uint32_t tile_positions() const { return lanes * keys_per_lane; }
};

PrefillAttentionLayout attention_prefill_layout(const OpTarget& target, const AttentionDims& dims);
uint32_t attention_prefill_shared_bytes(const AttentionDims& dims, const PrefillAttentionLayout& layout);

// Bindings: step (read, u32), q (read, f32 [n, n_heads*head_dim]), k_cache, v_cache (read, u32
// [context, n_kv_heads*head_dim/2]), partials (read-write, scratch of
// attention_prefill_partials_bytes), counters (read-write, u32, attention_prefill_counters_bytes,
// zero before the first dispatch; left zero by every dispatch), out (write, f32
// [n, n_heads*head_dim]). Push: n (u32). Grid: attention_prefill_grid(target, dims, n) (its z is
// the most chunks; any z >= 1 works with partials sized for it).
dsl::Kernel attention_prefill(const OpTarget& target, const AttentionDims& dims, uint32_t context,
                              const PrefillAttentionLayout& layout);
dsl::Kernel attention_prefill(const OpTarget& target, const AttentionDims& dims, uint32_t context);
// With its grid (ops/plan.h): the count is the block's tokens n (attention_prefill_grid).
Plan plan_attention_prefill(const OpTarget& target, const AttentionDims& dims, uint32_t context,
                            const PrefillAttentionLayout& layout);

// Workgroups (x, y, z) for a block of n tokens: (n_kv_heads, token tiles, chunks).
uint32_t attention_prefill_chunks(const AttentionDims& dims, const PrefillAttentionLayout& layout, uint32_t n);
std::array<uint32_t, 3> attention_prefill_grid(const AttentionDims& dims, const PrefillAttentionLayout& layout,
                                               uint32_t n);
std::array<uint32_t, 3> attention_prefill_grid(const OpTarget& target, const AttentionDims& dims, uint32_t n);
uint64_t attention_prefill_partials_bytes(const AttentionDims& dims, const PrefillAttentionLayout& layout, uint32_t n,
                                          uint32_t chunks);
uint64_t attention_prefill_counters_bytes(const AttentionDims& dims, const PrefillAttentionLayout& layout, uint32_t n);

}  // namespace bdsl::ops
