// What a model description's graph traits (models::ArchitectureTraits, in BitNetConfig) choose in
// the recorded kernels: the gate/up activation, whether attn_output and ffn_down normalize their
// input by a sub-norm or only quantize it, and the row order that lets adjacent-pair RoPE run on
// the NeoX kernels.
#pragma once
#include <cstdint>
#include <vector>

#include "models/bitnet_config.h"
#include "ops/common.h"
#include "ops/ternary.h"

namespace bdsl::bitnet {

inline ops::GateActivation gate_activation(const models::BitNetConfig& c) {
  return c.ffn_activation == models::FfnActivation::Relu2 ? ops::GateActivation::Relu2 : ops::GateActivation::Silu;
}

// attn_output's and ffn_down's input in decode: RMSNorm by the sub-norm then int8, or int8 alone.
inline ops::MatvecInput sub_norm_input(const models::BitNetConfig& c) {
  return c.sub_norms ? ops::MatvecInput::NormalizeInWorkgroup : ops::MatvecInput::QuantizeInWorkgroup;
}

// Adjacent-pair RoPE turns elements (2i, 2i + 1) of a head; NeoX turns (i, i + rope_dim / 2) by
// the same angle. With each head's rows of attn_q and attn_k reordered so that row 2i comes to i
// and row 2i + 1 to i + rope_dim / 2 (rows past rope_dim stay), NeoX on the reordered q and k is
// adjacent-pair RoPE on the file's, element for element (golden RopeAdjacent test); q.k sums the
// same products in another order, and V and everything after attention are untouched.
// neox_row_order(head_dim, rope_dim)[r] = the file's row within a head that goes to row r.
inline std::vector<uint32_t> neox_row_order(uint32_t head_dim, uint32_t rope_dim) {
  std::vector<uint32_t> from(head_dim);
  const uint32_t half = rope_dim / 2;
  for (uint32_t r = 0; r < head_dim; ++r) from[r] = r >= rope_dim ? r : r < half ? 2 * r : 2 * (r - half) + 1;
  return from;
}

// Whether q and k are held in neox_row_order (the dumps and the cache read back in the file's order).
inline bool reorders_qk_rows(const models::BitNetConfig& c) { return c.rope_mode == models::RopeMode::Adjacent; }

// The order of a whole attn_q (heads = n_heads) or attn_k (n_kv_heads) tensor: each head's rows in
// neox_row_order.
inline std::vector<uint32_t> neox_tensor_rows(const models::BitNetConfig& c, uint32_t heads) {
  const auto head = neox_row_order(c.head_dim, c.rope_dim);
  std::vector<uint32_t> from;
  for (uint32_t h = 0; h < heads; ++h)
    for (uint32_t r : head) from.push_back(h * c.head_dim + r);
  return from;
}

// Rows of whole heads (q or k, any number of positions) held in neox_row_order, back in the file's order.
inline std::vector<float> to_file_order(const models::BitNetConfig& c, std::vector<float> held) {
  const auto head = neox_row_order(c.head_dim, c.rope_dim);
  std::vector<float> out(held.size());
  for (size_t h = 0; h + c.head_dim <= held.size(); h += c.head_dim)
    for (uint32_t r = 0; r < c.head_dim; ++r) out[h + head[r]] = held[h + r];
  return out;
}

}  // namespace bdsl::bitnet
