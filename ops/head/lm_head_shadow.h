// The int8 shadow of the LM head's F16 table that ops/head/lm_head_pruned.h reads, derived on the
// device from the table already there (no host copy, no second upload). Per row r of w:
//   s_r = max|w_r| / 127, q_r = clamp(round(w_r / s_r), -127, 127) as int8 (half steps away from
//   zero; 0 where s_r is 0);
//   c_r >= ||w_r - s_r q_r||_2 + gamma (s_r ||q_r||_2 + ||w_r||_2), gamma = 2 dim 2^-24 + 2^-22;
//   d_r >= s_r ||q_r||_2;
// as models/bitnet/greedy_head.h states them, with the f32 rounding of this kernel's own sums,
// square roots and products covered: each norm is taken 1.002 times, the sum 1.001 times, and the
// extra 2^-22 in gamma covers the rounding of each e_i = w_i - s_r q_i (|error| <= 2^-24 (|s_r q_i|
// + |e_i|)). The bounds hold for the s_r and q_r written, whatever the division rounded to.
//
// lm_head_shadow(target, vocab, dim, rows_per_part):
//   bindings  0 .. parts - 1         table<p>   u32 read   F16 rows of part p (two a word), as lm_head's
//             parts .. 2 parts - 1   shadow<p>  u32 write  int8 rows of part p (dim / 4 words a row,
//                                               element 4w + j in byte j of word w)
//             2 parts                scale      f32 write  [vocab]  s_r
//             2 parts + 1            bound      f32 write  [2 vocab] (c_r, d_r)
//   push constants: none.   grid: (lm_head_shadow_workgroups(target, vocab), 1, 1); each workgroup
//   takes rows g, g + groups, ... of every part. dim: a multiple of 4.
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

uint32_t lm_head_shadow_workgroups(const OpTarget& target, uint32_t vocab);
dsl::Kernel lm_head_shadow(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part);
Plan plan_lm_head_shadow(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part);

}  // namespace bdsl::ops
