// Log-probabilities for a server's `logprobs`: each row's chosen token's log-softmax over its
// logits and its `top` best alternatives', written straight to the half of a host-visible staging
// buffer that a step counter's parity picks (as ops/common/parity_copy.h's ToHalf), so a step
// whose tokens the host reads later (pipelined steps) keeps them until then.
//
// A logit l's log-probability is (l - M) - log(S): M the row's largest logit, S the sum over the
// row of exp(l_j - M) (each invocation's share summed in order, then the subgroups' in order: the
// same value on every run). The alternatives are the row's k best logits (ops/head/top_k.h, most
// likely first) by the same formula, so a token among them gets the same value twice.
// CPU twin: models::token_logprobs (models/logprobs.h), the same formula in double.
//
// token_logprobs(target, vocab, k, top, capacity, row_top):
//   bindings  0 counter      u32 read   [1]: the step count; rows go to half (counter % 2)
//             1 logits       f32 read   row y at y * stride (push constant stride, u32)
//             2 sources      u32 read   the tokens
//             3 select       u32 read   [rows]: where row y's token is in sources; kNoLogprobs: the
//                                       row writes nothing
//             4 top_values   f32 read   [rows * k], row y's k best logits (top > 0 only)
//             5 top_indices  u32 read   [rows * k], their ids (top > 0 only)
//             6 out          u32 write  [2 * capacity * words], words = token_logprob_words(row_top):
//                                       row y's at (counter % 2) * capacity * words + y * words: the
//                                       token, its log-probability's f32 bits, then `top` pairs (id,
//                                       bits) (room for row_top >= top)
//   grid: (1, rows), rows <= capacity. vocab >= 1; top <= k <= kMaxTopK.
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

inline constexpr uint32_t kNoLogprobs = 0xffffffffu;
inline constexpr uint32_t token_logprob_words(uint32_t top) { return 2 + 2 * top; }

dsl::Kernel token_logprobs(const OpTarget& target, uint32_t vocab, uint32_t k, uint32_t top, uint32_t capacity, uint32_t row_top);
// With its grid (ops/plan.h); the count is the rows.
Plan plan_token_logprobs(const OpTarget& target, uint32_t vocab, uint32_t k, uint32_t top, uint32_t capacity, uint32_t row_top);

}  // namespace bdsl::ops
