// Sorting (value, index) pairs in a shared-memory window, for the kernels that keep the k best
// (top_k.h, sample_candidates.h): descending by value, ties by the lower index. Padding is value
// -inf with index kWindowNone, which sorts last. And a workgroup's kth largest value, for the
// thresholds that keep such windows short (lm_head_pruned.h, sample_candidates.h).
#pragma once
#include <cstdint>
#include <functional>

#include "dsl/dsl.h"

namespace bdsl::ops {

inline constexpr uint32_t kWindowNone = 0xffffffffu;

// a comes before b: larger value, or the same value at a lower index.
dsl::Expr<dsl::boolean> window_before(dsl::Expr<dsl::f32> av, dsl::Expr<dsl::u32> ai, dsl::Expr<dsl::f32> bv,
                                      dsl::Expr<dsl::u32> bi);

// Sorts window slots [0, chunk) (chunk a power of two) descending in place. Every invocation of
// the workgroup (wg of them) runs it; one barrier per pass.
void bitonic_sort(dsl::KernelBuilder& k, const dsl::Shared<dsl::f32>& sv, const dsl::Shared<dsl::u32>& si, uint32_t chunk,
                  uint32_t wg);

// Fills window slots [first, chunk) from source positions base + (slot - first) below `limit`,
// padding the rest. No barrier.
void fill_window(dsl::KernelBuilder& k, const dsl::Shared<dsl::f32>& sv, const dsl::Shared<dsl::u32>& si, uint32_t first,
                 uint32_t chunk, uint32_t wg, dsl::Expr<dsl::u32> base, dsl::Expr<dsl::u32> limit,
                 const std::function<dsl::Expr<dsl::f32>(dsl::Expr<dsl::u32>)>& value,
                 const std::function<dsl::Expr<dsl::u32>(dsl::Expr<dsl::u32>)>& index);

// The k best of `count` pairs (count uniform in the workgroup) into slots [0, k) of a window of
// `chunk` >= 2k: the first chunk sorted, then rounds that keep the best k, refill the other slots
// with the next chunk - k pairs and sort again. Ends with a barrier.
void window_top_k(dsl::KernelBuilder& k, const dsl::Shared<dsl::f32>& sv, const dsl::Shared<dsl::u32>& si, uint32_t chunk,
                  uint32_t k_best, uint32_t wg, dsl::Expr<dsl::u32> count,
                  const std::function<dsl::Expr<dsl::f32>(dsl::Expr<dsl::u32>)>& value,
                  const std::function<dsl::Expr<dsl::u32>(dsl::Expr<dsl::u32>)>& index);

// The kth largest (kth >= 1) of the values `mine` of the first n invocations (of wg), in every
// invocation (a shared load, not uniform); -inf when kth > n. Ranked by (value, invocation), so
// exactly one invocation holds rank kth - 1: n^2 comparisons in all, so keep n to a few hundred.
// Two barriers.
dsl::Expr<dsl::f32> select_kth_largest(dsl::KernelBuilder& k, uint32_t wg, uint32_t n, dsl::Expr<dsl::f32> mine,
                                       dsl::Expr<dsl::u32> kth);

}  // namespace bdsl::ops
