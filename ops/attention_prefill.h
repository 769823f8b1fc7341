// Causal attention for a block of n new query tokens at positions pos..pos+n-1 (pos read from the
// step-state buffer) against the F16 KV cache, which already holds the block's own K/V
// (rope_kv_write with n tokens): token t attends to positions 0..pos+t. Each token's positions
// are split into chunks like attention_decode's and combined by the last workgroup, so a block
// is one dispatch whatever its position.
//
// Not yet done: several query tokens of a block sharing one read of a K/V tile (the kernel
// reads the cache once per token and KV head, which is fine for prompts of a few hundred tokens).
#pragma once
#include <cstdint>

#include "dsl/builder.h"
#include "ops/attention_dims.h"
#include "ops/attention_split_kv.h"
#include "ops/target.h"

namespace bdsl::ops {

// Bindings: step (read, u32), q (read, f32 [n, n_heads*head_dim]), k_cache, v_cache (read, u32
// [context, n_kv_heads*head_dim/2]), partials (read-write, u32, attention_partials_bytes(dims,
// chunks, max n)), counters (read-write, u32 [max n * n_kv_heads], zeroed once), out (write, f32
// [n, n_heads*head_dim]). Push: n (u32). Grid: (n_kv_heads, chunks, n).
dsl::Kernel attention_prefill(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks);

}  // namespace bdsl::ops
