// Sampling on the device from the top-k candidates (ops/head/top_k.h: sorted descending, ties by
// the lower index), so that a step reads back one token id, not the candidates. The filters are
// llama.cpp's, in its order: top-k (0: no cut), top-p over what top-k kept, min-p; then the
// temperature, and one draw. The draw is the Gumbel-max trick: the kept candidate with the largest
// (logit - best logit) / temperature - log(-log(u)), u from Philox4x32-10 keyed by the seed at
// counter (token id, the row's counter), is a sample of softmax(logit / temperature) over the kept
// set. Every step's draw depends only on (seed, counter, id), never on what ran before or beside.
// CPU twin: models::Sampler (models/sampler.h), the same arithmetic in f32 in the same order,
// each product and sum rounded apart. exp and log are each side's own: Vulkan allows log an
// error of 2^-21 (absolute, near 1) and exp a few ulp, so a draw that falls that close to a tie
// or to the top-p boundary may differ between devices; -log(u) near u = 1, where a library log
// would lose most of its digits, is a series in the exact 1 - u on both sides.
//
// In detail, with l[0..K) the candidates' logits:
//   n = K, or min(K, top_k) when top_k > 0; inverse_temperature == 0 (greedy): n = 1.
//   top_p < 1: w[i] = exp(l[i] - l[0]); total = w[0] + ... + w[n-1] (in that order); n = the
//              smallest m whose w[0] + ... + w[m-1] >= top_p * total (summed in order), at least 1.
//   min_p > 0: n = the candidates i < n with l[i] >= l[0] + log(min_p) (a prefix, at least 1).
//   token = ids[argmax over i < n of (l[i] - l[0]) * inverse_temperature + (-log(-log(u_i)))],
//   -log(u) for u > 1 - 2^-8 as t + t^2 (1/2 + t (1/3 + t / 4)), t = 1 - u;
//   the lowest i on ties; u_i = open_unit(philox(counter = (ids[i], counter, 0, 0), key = seed)).
//
// sample_candidates(target, k, rows, advance_context):
//   bindings  0 top_values    f32 read   [rows * k]
//             1 top_indices   u32 read   [rows * k]
//             2 params        u32 read   [rows * kSampleParamsWords]: SampleParams::pack
//             3 token         u32 write  [rows]
//   with advance_context > 0 (one row; the decode graph feeding itself, ops/common/step_state.h):
//             4 step          u32 read-write [4]: the counter is step.pos + 1 (the chosen token's
//                             position) instead of the params'; token <- the choice, pos + 1, epoch + 1
//             5 generated     u32 write  [advance_context]: generated[pos] <- the choice
//   push constants: none.   grid: (1, rows, 1): workgroup y samples row y.
//
// sample_candidate_list(target, k, advance_context, embed_next): the same draw from an unsorted
// list of candidates of any length (ops/head/lm_head_pruned.h's lm_head_candidate_list): one
// workgroup keeps the list's k best, sorted as top_k sorts them, and draws from them. First it
// keeps only the candidates at or above T, the k'-th largest (k' = sample_rows_needed) of its
// invocations' maxima over their shares of the list (k' distinct candidates reach T, so the k' best
// do); when those fit a short window it sorts that, else the whole list in windows.
//   bindings  0 list_values   f32 read   [count]
//             1 list_indices  u32 read   [count] (distinct ids)
//             2 list_count    u32 read-write [1]: count >= 1; left zero (the next list starts empty)
//             3 params        u32 read   [kSampleParamsWords]
//             4 top_values    f32 write  [k]   the k' best, then what the window held (value -inf,
//                                              index 0xffffffff past it)
//             5 top_indices   u32 write  [k]
//             6 token         u32 write  [1]
//             7 list_length   u32 write  [1]: count (how well the bounds pruned)
//   with advance_context > 0, as sample_candidates': step, generated
//   with embed_next: embed_table0 .. (u32 read) and x_next (f32 write [dim]): the chosen token's row
//   of the F16 embedding table widened to f32 (ops/common/embedding_lookup.h's emit_embedding_row),
//   the next replay's input.
//   push constants: none.   grid: (1, 1, 1).
// sample_candidate_list_rows(target, k): the same draw for a batch, a grid row per list (no
//   advance, no embedding), each row's arithmetic the single list's, bit for bit: row y's list at
//   list_values/list_indices[y * stride ..] (push stride, u32), its count at list_count[y], its
//   settings at params[y * kSampleParamsWords ..], its k candidates at top_values/top_indices[y * k ..],
//   token[y], list_length[y]; and binding 8 best (u32 write [rows]): the list's best id (the
//   argmax of the row's logits, the lowest id on ties; 0 for an empty list).
//   grid: (1, rows, 1).
#pragma once
#include <array>
#include <cstdint>
#include <optional>

#include "dsl/dsl.h"
#include "ops/common/embedding_lookup.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

inline constexpr uint32_t kSampleParamsWords = 8;

// One row's settings as the kernel reads them.
struct SampleParams {
  float inverse_temperature = 0;  // 1 / temperature; 0: greedy (the first candidate)
  uint32_t top_k = 0;             // 0: every candidate
  float top_p = 1;                // 1: off
  float min_p = 0;                // 0: off
  uint64_t seed = 0;
  uint32_t counter = 0;           // the chosen token's position, so a sequence's draws never repeat

  std::array<uint32_t, kSampleParamsWords> pack() const;
};

dsl::Kernel sample_candidates(const OpTarget& target, uint32_t k, bool rows = false, uint32_t advance_context = 0);
// With its grid (ops/plan.h); the count is the rows (1 without rows).
Plan plan_sample_candidates(const OpTarget& target, uint32_t k, bool rows = false, uint32_t advance_context = 0);

// How many of the best candidates a draw under `params` (a SampleParams::pack buffer, read at
// word 0 and 1, of row `row` where given) can take, given k: 1 for a greedy draw (inverse
// temperature 0), else top_k capped at k, or k when top_k is 0. The pruned head needs the list
// to hold at least these.
dsl::Expr<dsl::u32> sample_rows_needed(const dsl::Buffer<dsl::u32>& params, uint32_t k,
                                       std::optional<dsl::Expr<dsl::u32>> row = std::nullopt);

struct SampleListPlan {
  uint32_t workgroup = 0;     // invocations
  uint32_t shares = 0;        // invocations that take a share of the list for the threshold T
  uint32_t small_window = 0;  // the smallest window (doubled up to large_window while the list does not fit)
  uint32_t large_window = 0;  // pairs sorted at once otherwise (rounds keep the best k)
};
SampleListPlan sample_list_plan(const OpTarget& target, uint32_t k);
dsl::Kernel sample_candidate_list(const OpTarget& target, uint32_t k, uint32_t advance_context = 0,
                                  std::optional<EmbeddingShape> embed_next = std::nullopt);
Plan plan_sample_candidate_list(const OpTarget& target, uint32_t k, uint32_t advance_context = 0,
                                std::optional<EmbeddingShape> embed_next = std::nullopt);
dsl::Kernel sample_candidate_list_rows(const OpTarget& target, uint32_t k);
Plan plan_sample_candidate_list_rows(const OpTarget& target, uint32_t k);

}  // namespace bdsl::ops
