#include "ops/common/parity_copy.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "ops/common/matrix_support.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

Expr<u32> emit_copy_from_half(const Buffer<u32>& src, const Buffer<u32>& dst, Expr<u32> count, uint32_t words, Expr<u32> first,
                              Expr<u32> stride) {
  auto half = let("half", (count & 1u) * words);
  for_range(first, constant<u32>(words), stride, [&](Expr<u32> i) { dst[i] = Expr<u32>(src[half + i]); }, "i");
  return half;
}

Kernel parity_copy(const OpTarget& target, uint32_t words, ParityCopy direction, bool advance) {
  if (words == 0) throw std::invalid_argument("parity_copy: no words");
  const uint32_t wg = std::min(256u, target.max_workgroup_invocations);
  const bool from = direction == ParityCopy::FromHalf;
  KernelBuilder k(std::string("parity_copy_") + (from ? "from_half_" : "to_half_") + std::to_string(words) + (advance ? "_advance" : ""),
                  {wg, 1, 1});
  auto counter = k.buffer<u32>("counter", advance ? Access::ReadWrite : Access::Read);
  auto src = k.buffer<u32>("src", Access::Read);
  auto dst = k.buffer<u32>("dst", Access::Write);
  auto count = k.broadcast("count", Expr<u32>(counter[0u]));
  if (from) {
    emit_copy_from_half(src, dst, count, words, k.local_index(), constant<u32>(wg));
  } else {
    auto half = let("half", (count & 1u) * words);
    for_range(k.local_index(), words, wg, [&](Expr<u32> i) { dst[half + i] = Expr<u32>(src[i]); }, "i");
  }
  if (advance) {
    barrier();  // every invocation has read the counter
    if_(k.local_index() == 0u, [&] { counter[0u] = count + 1u; });
  }
  return k.build();
}

Plan plan_parity_copy(const OpTarget& target, uint32_t words, ParityCopy direction, bool advance) {
  return {parity_copy(target, words, direction, advance), fixed_grid({1})};
}

}  // namespace bdsl::ops
