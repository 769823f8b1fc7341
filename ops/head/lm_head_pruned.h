// Greedy decoding's LM head, exact with half the bytes: the argmax of the F16 head's logits
// (lm_head.h), bit for bit with its ties, reading an int8 shadow of the table
// (models/bitnet/greedy_head.h) and only the few F16 rows that could win. Three dispatches:
//
// lm_head_input: the final norm x (bit for bit rms_norm's), x quantized to int8 once (x~ = xq sx,
//   sx = max|x| / 127) and the norms ||x||_2, ||x - x~||_2 (each (1 + 1e-3) for its own rounding).
// lm_head_bounds: every row's approximate logit a_r = s_r sx (q_r . xq) from packed int8 dot
//   products, and, with m_r = c_r ||x||_2 + d_r ||x - x~||_2 + |a_r| 1e-6,
//   upper_r = a_r + m_r >= logit_r >= a_r - m_r = lower_r: c_r bounds the shadow's error per unit
//   of ||x|| and d_r = s_r ||q_r||_2 that of quantizing x.
//   Writes upper[r] and each workgroup's largest lower_r.
// lm_head_candidates: L = the largest lower bound. A row with upper_r < L cannot be the argmax
//   (some row's logit is >= L > its own); every other row (the argmax and all its ties among
//   them) gets its logit exactly as lm_head computes it, and each workgroup writes the argmax of
//   those (value, index; index 0xffffffff where it had none) for argmax_final, or runs
//   argmax_final itself in its last workgroup (final_advance below).
// On the 2B shape: 328 MB read instead of 656, plus the candidates' rows. If the bounds are
// loose (a flat distribution), more rows are candidates: slower, never wrong.
//
// lm_head_bounds(target, vocab, dim, rows_per_part):
//   bindings  0 xq            uvec4 read   [dim / 16]  lm_head_input's int8 x
//             1 stats         f32   read   [4]         lm_head_input's sx and norms
//             2 .. parts + 1  uvec4 read   int8 rows of part p (dim / 16 per row)
//             parts + 2 scale f32   read   [vocab]  s_r
//             parts + 3 bound vec2  read   [vocab]  (c_r, d_r)
//             parts + 4 upper f32   write  [vocab]
//             parts + 5 lower f32   write  [lm_head_bounds_workgroups]
//   grid: (lm_head_bounds_workgroups(target, vocab), 1, 1)
// lm_head_candidates(target, vocab, dim, rows_per_part):
//   bindings  0 x             as lm_head's x (lm_head_input's xn)
//             1 .. parts      as lm_head's table parts
//             parts + 1 upper f32   read   [vocab]
//             parts + 2 lower f32   read   [lm_head_bounds_workgroups]
//             parts + 3 part_values   f32 write [argmax_plan(target, vocab).groups]
//             parts + 4 part_indices  u32 write [the same]
//   grid: (argmax_plan(target, vocab).groups, 1, 1): argmax_final reads its partials as it reads
//   argmax_partial's.
// lm_head_candidate_list(target, vocab, dim, rows_per_part, k): sampling's head (the k best rows
//   for a draw, ops/head/sample_candidates.h) from the same bounds. L = the k'-th largest of the
//   workgroup's invocations' maxima of `lower` (each over workgroups of its own, so k' distinct rows
//   have lower_r >= L), k' = 1 for a greedy draw, else min(top_k, k), or k when top_k is 0 (read
//   from the draw's params). A row with upper_r < L is below k' rows' logits, so the k' best are
//   among the others; each of those gets its logit exactly as lm_head computes it, appended in no
//   particular order to a list for sample_candidate_list, which sorts it.
//   bindings  0 x, 1 .. parts the table, upper, lower as lm_head_candidates'
//             parts + 3 params       u32 read   [kSampleParamsWords] (its top_k and temperature)
//             parts + 4 list_values  f32 write  [vocab]
//             parts + 5 list_indices u32 write  [vocab]
//             parts + 6 list_count   u32 read-write [1]: zero before the dispatch (sample_candidate_list
//                                    leaves it so)
//   grid: (lm_head_candidate_list_workgroups(target, vocab), 1, 1).
//   Only rows whose logit reaches L are appended (below it, k' rows are above).
//
// With rows (a batch: many x against the same table, a row of the grid per x; each x's arithmetic
// is the single x's, bit for bit):
// lm_head_input(target, dim, true): x row y (of dim) in x, xn, xq (dim / 4 words) and stats (4).
//   grid (1, rows).
// lm_head_bounds(target, vocab, dim, rows_per_part, true): xq and stats row y; push stride (u32):
//   upper[y * stride + r]; lower[y * lm_head_bounds_workgroups + g]. grid (workgroups, rows).
// lm_head_candidate_rows(target, vocab, dim, rows_per_part, lower_count): lm_head_candidates for
//   x row y (xn[y * dim ...]) against upper[y * stride + r] (push stride, u32) and lower bounds
//   lower[y * lower_count ...] (whichever bounds pass wrote them: lm_head_bounds with rows, or
//   ops/head/lm_head_bounds_coopmat.h), its partials at part_values[y * groups + g] for
//   argmax_final with rows. grid (argmax_plan(target, vocab).groups, rows). final_pick: each
//   row's last workgroup runs that argmax_final itself (one dispatch fewer): binds counter (u32
//   read-write [rows], zero before the first dispatch, left zero) and token (u32 write [rows])
//   after part_indices.
// lm_head_candidate_list_rows(target, vocab, dim, rows_per_part, k, lower_count):
//   lm_head_candidate_list for x row y, its bounds as lm_head_candidate_rows reads them (push
//   stride, u32), its settings at params[y * kSampleParamsWords ..], its list at
//   list_values/list_indices[y * stride ..] and its count at list_count[y] (for
//   sample_candidate_list_rows). grid (lm_head_candidate_list_workgroups(target, vocab), rows).
// dim: a multiple of 16 (lm_head_pruned_supported).
#pragma once
#include <cstdint>
#include <optional>

#include "dsl/dsl.h"
#include "ops/common/embedding_lookup.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

bool lm_head_pruned_supported(uint32_t dim);
// A row's approximate logit a_r and margin m_r from its shadow dot product (q_r . xq), the
// arithmetic of every bounds pass (lm_head_bounds, ops/head/lm_head_bounds_coopmat.h):
// upper = approx + margin, lower = approx - margin. row_bound: (c_r, d_r).
struct LmHeadRowBound {
  dsl::Expr<dsl::f32> approx, margin;
};
LmHeadRowBound lm_head_row_bound(dsl::Expr<dsl::i32> dot, dsl::Expr<dsl::f32> row_scale, dsl::Expr<dsl::vec2> row_bound,
                                 dsl::Expr<dsl::f32> sx, dsl::Expr<dsl::f32> norm, dsl::Expr<dsl::f32> residual_norm);
uint32_t lm_head_bounds_workgroups(const OpTarget& target, uint32_t vocab);
dsl::Kernel lm_head_bounds(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, bool rows = false);
// The final norm for the pruned head, once: xn exactly as rms_norm (ops/common/rms_norm.h) writes it (the
// candidates read it), x~ = sx xq quantized as lm_head_bounds would, and the norms the bounds need.
//   bindings  0 x       f32 read   [dim] (the residual stream)
//             1 weight  f32 read   [dim] (output_norm)
//             2 xn      f32 write  [dim]
//             3 xq      u32 write  [dim / 4]  int8, element 4w + j in byte j of word w
//             4 stats   f32 write  [4]  sx, ||xn||_2 (1 + 1e-3), ||xn - x~||_2 (1 + 1e-3) + 1e-30, 0
//   push eps (f32); grid (1, 1, 1) of rms_norm_workgroup(target) invocations.
dsl::Kernel lm_head_input(const OpTarget& target, uint32_t dim, bool rows = false);
// final_advance: the last workgroup to finish also runs argmax_final (ops/head/argmax.h) over every
// workgroup's partial, with that advance_context (0: the token only), instead of a dispatch of
// its own; bindings then add counter (u32 read-write [1], zero before the first dispatch and
// left zero) and argmax_final's token [, step, generated] after part_indices.
// embed_next (with final_advance): that workgroup also writes the chosen token's row of the F16
// embedding table widened to f32, as embedding_lookup (ops/common/embedding_lookup.h) does: bindings
// embed_table0 .. (u32 read, the shape's parts) and x_next (f32 write [dim]) come last.
dsl::Kernel lm_head_candidates(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part,
                               std::optional<uint32_t> final_advance = std::nullopt,
                               std::optional<EmbeddingShape> embed_next = std::nullopt);
dsl::Kernel lm_head_candidate_rows(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part,
                                   uint32_t lower_count, bool final_pick = false);
uint32_t lm_head_candidate_list_workgroups(const OpTarget& target, uint32_t vocab);
dsl::Kernel lm_head_candidate_list(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t k);
dsl::Kernel lm_head_candidate_list_rows(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t k,
                                        uint32_t lower_count);

// The kernels with their grids (ops/plan.h).
Plan plan_lm_head_input(const OpTarget& target, uint32_t dim, bool rows = false);
Plan plan_lm_head_bounds(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, bool rows = false);
Plan plan_lm_head_candidate_rows(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part,
                                 uint32_t lower_count, bool final_pick = false);
Plan plan_lm_head_candidates(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part,
                             std::optional<uint32_t> final_advance = std::nullopt,
                             std::optional<EmbeddingShape> embed_next = std::nullopt);
Plan plan_lm_head_candidate_list(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t k);
Plan plan_lm_head_candidate_list_rows(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t k,
                                      uint32_t lower_count);

}  // namespace bdsl::ops
