// What the two tensor-core projections (ternary_matmul_coopmat's staged tiles and
// ternary_matmul_fragments' register operands) share: the block, the codes' unpacking and the
// epilogue.
#pragma once
#include <cstdint>
#include <optional>

#include "dsl/dsl.h"

namespace bdsl::ops {

constexpr uint32_t kBlockCols = 128;  // one I2_S block: the columns a step of the reduction takes

// Codes 0, 1, 2 at bit `shift` of each byte of an I2_S word, as int8 -1, 0, +1 in the same bytes:
// per byte (code + 0x7f) ^ 0x80 = code - 1, with no carry between bytes (code + 0x7f < 0x100).
inline dsl::Expr<dsl::u32> ternary_bytes(const dsl::Expr<dsl::u32>& word, uint32_t shift) {
  return (((word >> shift) & 0x03030303u) + 0x7f7f7f7fu) ^ 0x80808080u;
}

// y[at] = acc / s * scale, as ternary_matmul (+ y[at] with a residual), and the accumulator where asked.
inline void write_projection(const dsl::Buffer<dsl::f32>& y, const std::optional<dsl::Buffer<dsl::i32>>& acc_out,
                             bool add_residual, dsl::Expr<dsl::u32> at, dsl::Expr<dsl::i32> dot, dsl::Expr<dsl::f32> s,
                             dsl::Expr<dsl::f32> scale) {
  using namespace dsl;
  auto v = let("proj", cast<f32>(dot) / s * scale);
  if (add_residual)
    y[at] = y[at] + v;
  else
    y[at] = v;
  if (acc_out) (*acc_out)[at] = dot;
}

}  // namespace bdsl::ops
