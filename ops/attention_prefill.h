// Causal attention for a block of n new query tokens at positions pos..pos+n-1 (pos read from the
// step-state buffer) against the F16 KV cache, which already holds the block's own K/V
// (rope_kv_write with n tokens): token t attends to positions 0..pos+t.
//
// Tiled ("flash attention" on plain f32 FMA): workgroup (kv, tile) takes a tile of query tokens
// times the `group` query heads that share KV head kv, and streams that head's K/V positions
// through shared memory in tiles, each read once for every query row of the tile; tiles past the
// tile's causal limit are never read. Per query row an online softmax (running max m, sum l,
// unnormalised weighted V rescaled by exp(m_old - m_new)), f32 throughout, scores scaled by
// 1/sqrt(head_dim) as in the reference; the output is divided by l at the end.
//
// Inside a workgroup, `lanes` invocations of one subgroup serve one query token (all its heads):
// for scores, lane j takes keys j, j + lanes, ... of the K tile (its query rows from shared
// memory), the row's max and sum go round the lanes by a shuffle butterfly, and the weights go to
// shared memory; for P x V, lane j owns 4-dim slices j, j + lanes, ... of every head's output, so
// each lane keeps its token's m, l and rescale factor in registers. Three barriers per K/V tile.
// The token tiles are handed out last first: the longest (most positions) start first.
//
// Not yet done: splitting a tile's positions over workgroups (a short block late in a long
// context runs on few workgroups), tensor cores.
#pragma once
#include <array>
#include <cstdint>

#include "dsl/builder.h"
#include "ops/attention_dims.h"
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
// [context, n_kv_heads*head_dim/2]), partials, counters (read-write, u32; unused, kept so the
// bindings match attention_decode's: any buffer of at least 4 bytes), out (write, f32
// [n, n_heads*head_dim]). Push: n (u32). Grid: attention_prefill_grid(target, dims, n).
dsl::Kernel attention_prefill(const OpTarget& target, const AttentionDims& dims, uint32_t context,
                              const PrefillAttentionLayout& layout);
dsl::Kernel attention_prefill(const OpTarget& target, const AttentionDims& dims, uint32_t context);

// Workgroups (x, y, z) for a block of n tokens: (n_kv_heads, token tiles, 1).
std::array<uint32_t, 3> attention_prefill_grid(const AttentionDims& dims, const PrefillAttentionLayout& layout,
                                               uint32_t n);
std::array<uint32_t, 3> attention_prefill_grid(const OpTarget& target, const AttentionDims& dims, uint32_t n);

}  // namespace bdsl::ops
