// Sampling over the whole vocabulary, for top_k 0 ("no top-k cut", as llama.cpp means it): top-p
// and min-p over every logit, then the temperature and the Gumbel-max draw of sample_candidates,
// so no fixed candidate set bounds what can be drawn. The top-p cut needs the mass of the most
// likely tokens in order; it is found exactly, with no sort and no float sum whose order could
// differ between devices, runs or the host twin:
//   best     the largest logit (argmax_final's token, read back from the logits)
//   w[i]     floor(min(exp(l[i] - best), 1) * 2^31), an integer (a token below 2^-31 of the best
//            weighs 0; the mass left out is at most vocab * 2^-31 of the best's)
//   total    the sum of every w, exact in 64 bits; P = floor(top_p * 2^32) (u32);
//            goal = ceil(P * total / 2^32)
//   key[i]   l[i]'s f32 bits mapped to a u32 of the same order (-0 as +0)
//   K        the largest key whose tokens at or above it weigh at least goal. The nucleus is every
//            token with key >= K: the smallest set of most likely tokens reaching top_p of the
//            mass, with every token tied at the boundary logit kept. top_p 1: every token.
//   min_p    > 0: of those, the tokens with l[i] >= best + log(min_p)
//   token    the kept token with the largest gumbel_score (ops/head/draw_support.h; ties: the
//            lower id), u_i at counter (i, counter).
// Only rows that sample (inverse temperature > 0) with top_k 0 draw here; every kernel leaves the
// others alone (no bucket, partial or token written): a greedy row's token is the argmax's, a
// top-k row's sample_candidates'. So a batch records both draws and each row takes its own.
// K comes from a radix select over the key in three passes (bits 31..21, 20..10, 9..0): a pass
// sums the weights of the tokens matching the bits chosen so far into buckets of 64-bit integers
// (atomics in shared memory, then in the buffer: integer sums, the same in any order), and a
// one-workgroup select walks the buckets from the top until the mass reaches the goal.
// CPU twin: models::Sampler::sample_vocabulary (models/sampler.h).
//
// Every kernel serves rows (sequences): grid y is the row, its logits at y * stride, its settings
// at params[y * kSampleParamsWords] (SampleParams::pack), its state at y * kVocabStateWords.
// vocab_mass_histogram(target, vocab, pass):
//   bindings  0 logits   f32 read   [rows * stride]
//             1 best     u32 read   [rows]: each row's argmax (argmax_final's token)
//             2 params   u32 read
//             3 state    u32 read   [rows * kVocabStateWords]: the key's bits chosen so far
//             4 mass     u32 read-write [rows * 2 * kVocabBuckets]: (low, high) words of a bucket's
//                        sum; zero before the first pass, left zero by each select
//   push constants: stride (u32).   grid: (vocab_sampling_groups(target, vocab), rows).
// vocab_mass_select(target, pass):
//   bindings  0 params, 1 mass (read-write), 2 state (read-write)
//   push constants: none.   grid: (1, rows).
// vocab_draw_partial(target, vocab, step_counter):
//   bindings  0 logits, 1 best, 2 params, 3 state (read: K)
//             4 part_values f32 write [rows * groups], 5 part_indices u32 write [rows * groups]
//             with step_counter, 6 step (u32 read, one row): the counter is step.pos + 1
//             (the chosen token's position) instead of the params'
//   push constants: stride (u32).   grid: (vocab_sampling_groups(target, vocab), rows).
// vocab_draw_final(target, vocab, advance_context, embed_next):
//   bindings  0 part_values, 1 part_indices (read), 2 params, 3 token u32 write [rows]
//             with advance_context > 0 (one row): step, generated, as sample_candidates'
//             with embed_next: embed_table0 .. and x_next, as sample_candidate_list's
//   push constants: none.   grid: (1, rows).
// The passes and selects of a row without a top-p cut (top_p 1) do nothing.
#pragma once
#include <cstdint>
#include <optional>

#include "dsl/dsl.h"
#include "ops/common/embedding_lookup.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

inline constexpr uint32_t kVocabStateWords = 8;
inline constexpr uint32_t kVocabBuckets = 2048;  // the widest pass's (11 bits)
inline constexpr uint32_t kVocabPasses = 3;

uint32_t vocab_sampling_groups(const OpTarget& target, uint32_t vocab);
dsl::Kernel vocab_mass_histogram(const OpTarget& target, uint32_t vocab, uint32_t pass);
dsl::Kernel vocab_mass_select(const OpTarget& target, uint32_t pass);
dsl::Kernel vocab_draw_partial(const OpTarget& target, uint32_t vocab, bool step_counter = false);
dsl::Kernel vocab_draw_final(const OpTarget& target, uint32_t vocab, uint32_t advance_context = 0,
                             std::optional<EmbeddingShape> embed_next = std::nullopt);
// With their grids (ops/plan.h); the count is the rows.
Plan plan_vocab_mass_histogram(const OpTarget& target, uint32_t vocab, uint32_t pass);
Plan plan_vocab_mass_select(const OpTarget& target, uint32_t pass);
Plan plan_vocab_draw_partial(const OpTarget& target, uint32_t vocab, bool step_counter = false);
Plan plan_vocab_draw_final(const OpTarget& target, uint32_t vocab, uint32_t advance_context = 0,
                           std::optional<EmbeddingShape> embed_next = std::nullopt);

}  // namespace bdsl::ops
