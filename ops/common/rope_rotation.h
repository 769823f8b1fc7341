// The NeoX RoPE rotation shared by rope_kv_write and the QKV projection that rotates in its
// epilogue (ternary_matvec_qkv_rope). The (cos, sin) pairs come from a table the host computes
// once, numerics::rope_table: [pos][pair] exactly as the CPU reference rounds them, so the kernels
// turn by the reference's own bits, and a token's rotation is one load instead of a chain of
// wide-precision square roots and a range reduction (~1.4 us on the QKV critical path).
// Emits DSL code; not an op.
#pragma once
#include <cstdint>

#include "dsl/dsl.h"

namespace bdsl::ops::rope {

using namespace bdsl::dsl;

// Pair i's (cos, sin) at position pos from the table of `context` rows of head_dim / 2 pairs
// (a position past the table reads its last row: such positions write no cache row).
inline Expr<vec2> table_rotation(const Buffer<vec2>& table, Expr<u32> pos, Expr<u32> i, uint32_t context, uint32_t head_dim) {
  return table[min(pos, constant<u32>(context - 1)) * (head_dim / 2) + i];
}

// (x0, x1) turned by (c, s): (x0 c - x1 s, x0 s + x1 c).
inline Expr<vec2> rotate(Expr<f32> x0, Expr<f32> x1, Expr<vec2> cs) {
  return make_vec<f32>(x0 * cs.x() - x1 * cs.y(), x0 * cs.y() + x1 * cs.x());
}

}  // namespace bdsl::ops::rope
