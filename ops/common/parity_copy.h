// Copies between a device buffer and one of the two halves of a staging buffer, the half picked
// by a counter on the device (counter % 2): how a recording replayed back to back takes new inputs
// at each replay, and hands its outputs out, while the host fills or reads the other half (the
// host counts the replays too, so it knows which half each one uses).
//
// parity_copy(target, words, direction, advance):
//   bindings  counter  u32 read [1] (read-write with advance)
//             src      u32 read
//             dst      u32 write
//   FromHalf: dst[i] = src[(counter % 2) * words + i]; ToHalf: dst[(counter % 2) * words + i] = src[i],
//   for i < words. advance: the counter then grows by one (after every invocation read it).
//   push constants: none.   grid: (1, 1, 1).
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

enum class ParityCopy { FromHalf, ToHalf };

dsl::Kernel parity_copy(const OpTarget& target, uint32_t words, ParityCopy direction, bool advance = false);
Plan plan_parity_copy(const OpTarget& target, uint32_t words, ParityCopy direction, bool advance = false);

// Inside another kernel, FromHalf spread over invocations: dst[i] = src[half + i] for i = first,
// first + stride, ... below words, where half = (count % 2) * words and count is the counter's
// value as read. Returns half (where the half's other words are).
dsl::Expr<dsl::u32> emit_copy_from_half(const dsl::Buffer<dsl::u32>& src, const dsl::Buffer<dsl::u32>& dst, dsl::Expr<dsl::u32> count,
                                        uint32_t words, dsl::Expr<dsl::u32> first, dsl::Expr<dsl::u32> stride);

}  // namespace bdsl::ops
