// The LM head for a batch of tokens: logits[t][r] = x[t] . table[r] over the F16 table (tied
// embedding), each row read from memory once for every token of the batch. Each logit is
// lm_head's arithmetic for that row and token (the same quads per lane, in the same order, then
// the subgroup sum), so a token's logits do not depend on the other tokens of the batch.
//
// A workgroup holds its subgroups' rows in registers and walks the tokens a tile at a time: the
// tile's x rows go to shared memory once (each split into its quads' low and high vec4s, so that
// a subgroup's reads are consecutive; the next tile's read into registers meanwhile), and every
// subgroup takes a quad at a time: each token's x read once for all its rows, each row's quad
// unpacked once for the whole tile.
//
// Bindings, by name:
//   x        vec4   read   [tokens, dim / 4]
//   table<p> uvec4  read   part p of the table (lm_head_split's parts), dim / 8 quads a row
//   logits   f32    write  [tokens, stride]: row r of token t at t * stride + r
// Push constants: tokens (u32), stride (u32). dim must be a multiple of 8.
// Grid: (lm_head_batch_workgroups(target, vocab), 1, 1).
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

dsl::Kernel lm_head_batch(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part);
uint32_t lm_head_batch_workgroups(const OpTarget& target, uint32_t vocab);
Plan plan_lm_head_batch(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part);  // ops/plan.h

}  // namespace bdsl::ops
