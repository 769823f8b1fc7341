// The online-softmax merge of attention's chunk partials, shared by the attention kernel's own
// combine (ops/attention/attention_split_kv.cpp) and the consumer that merges them in its norm prologue
// (ops/attention/attention_partials_input.cpp): one arithmetic for both. Internal to ops/.
#pragma once
#include <vector>

#include "dsl/dsl.h"

namespace bdsl::ops::detail {

// The softmax's "no score yet" maximum.
inline constexpr float kAttentionLowest = -3.402823466e38f;

// A running online softmax over chunk partials: the largest max so far, the total weight and the
// weighted output pairs.
struct MergeState {
  dsl::Expr<dsl::f32> max, total;
  std::vector<dsl::Expr<dsl::vec2>> pairs;
};

// One round of chunks merged into `s`: each chunk's (max, sum) `stats` and its pairs
// `parts[pair][chunk]`, `valid` saying which chunks exist (the others read a valid chunk and
// weigh 0). The arithmetic of every combine of attention's partials, in attention or after it.
MergeState merge_round(const MergeState& s, const std::vector<dsl::Expr<dsl::boolean>>& valid,
                       const std::vector<dsl::Expr<dsl::vec2>>& stats,
                       const std::vector<std::vector<dsl::Expr<dsl::vec2>>>& parts);

}  // namespace bdsl::ops::detail
