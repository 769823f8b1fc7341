// The head layout shared by RoPE, the KV cache and attention. Query head h reads KV head
// h / (n_heads / n_kv_heads) (grouped-query attention).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace bdsl::ops {

struct AttentionDims {
  uint32_t n_heads = 0;
  uint32_t n_kv_heads = 0;
  uint32_t head_dim = 0;  // a multiple of 4: RoPE pairs (i, i + head_dim/2) are packed two by two

  uint32_t group() const { return n_heads / n_kv_heads; }
  uint32_t q_width() const { return n_heads * head_dim; }
  uint32_t kv_width() const { return n_kv_heads * head_dim; }
  // The F16 KV cache: one u32 word per two halves, kv_words() words per position.
  uint32_t kv_words() const { return kv_width() / 2; }

  void check(const char* op) const {
    if (n_kv_heads == 0 || n_heads % n_kv_heads != 0 || head_dim == 0 || head_dim % 4 != 0)
      throw std::invalid_argument(std::string(op) + ": need n_heads % n_kv_heads == 0 and head_dim % 4 == 0, got " +
                                  std::to_string(n_heads) + "/" + std::to_string(n_kv_heads) + " heads, head_dim " +
                                  std::to_string(head_dim));
  }
};

}  // namespace bdsl::ops
