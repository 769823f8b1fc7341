// The CPU reference forward pass of BitNet b1.58, written from docs/format.md and independent of any
// GPU code. Per layer:
//   h   = x + attn_output(attn_sub_norm(attention(rope(q(n)), rope(k(n)), v(n)))),  n = attn_norm(x)
//   out = h + ffn_down(ffn_sub_norm(relu(ffn_gate(m))^2 * ffn_up(m))),             m = ffn_norm(h)
// then output_norm and the LM head. One `forward` call takes any number of tokens (the prompt as
// a batch, or one token while decoding) at the positions after those already in the KV cache.
// Every operation works row by row in a fixed order, so decoding token by token gives the same
// bits as the batch.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "golden/matrix.h"
#include "golden/reference_weights.h"

namespace bdsl::golden {

// Receives every intermediate of a forward call, named as llama.cpp's eval callback names them
// (inp_embd, attn_norm-N, Qcur-N, Kcur-N (both after RoPE), Vcur-N, kqv_out-N, attn_sub_norm-N,
// attn_o_out-N, ffn_inp-N, ffn_norm-N, ffn_gate-N, ffn_up-N, ffn_out-N = relu(gate)^2 * up,
// ffn_sub_norm-N, ffn_down-N, l_out-N, result_norm, result_output), each [tokens, features];
// and the exact int32 accumulators of each ternary projection, named after its weight:
// attn_q_acc-N, attn_k_acc-N, attn_v_acc-N, attn_output_acc-N, ffn_gate_acc-N, ffn_up_acc-N,
// ffn_down_acc-N, each [tokens, output features]. Either callback may be empty.
struct ForwardObserver {
  std::function<void(std::string_view name, const MatrixF& value)> on_tensor;
  std::function<void(std::string_view name, const MatrixI& accumulators)> on_accumulators;
};

class ReferenceModel {
 public:
  // `weights` must outlive the model.
  explicit ReferenceModel(const ReferenceWeights& weights);

  // Runs `tokens` at positions n_past() .. n_past() + tokens.size() - 1, appends their keys and
  // values to the cache, and returns the logits [tokens, vocab]. Throws std::out_of_range for a
  // token id outside the vocabulary, std::length_error when the context would overflow.
  MatrixF forward(std::span<const int32_t> tokens, const ForwardObserver* observer = nullptr);

  std::size_t n_past() const { return n_past_; }
  void reset();  // empties the KV cache
  const models::BitNetConfig& config() const { return weights_->config; }

 private:
  struct LayerCache {
    MatrixF k;  // [n_past, kv_dim], rows appended as tokens arrive
    MatrixF v;
  };

  MatrixF embed(std::span<const int32_t> tokens) const;
  MatrixF attention_block(std::size_t l, const MatrixF& x, const ForwardObserver* obs);
  MatrixF ffn_block(std::size_t l, const MatrixF& h, const ForwardObserver* obs) const;
  MatrixF logits(const MatrixF& x, const ForwardObserver* obs) const;

  const ReferenceWeights* weights_;
  std::vector<LayerCache> cache_;
  std::size_t n_past_ = 0;
};

// Index of the largest value; the lowest index among equal values (so ties are deterministic).
int32_t argmax(std::span<const float> values);

// Runs the prompt as one batch from an empty cache (reported to `prompt_observer`), then `n_new`
// greedy steps one token at a time. Returns the generated ids; `prompt_logits` (if given)
// receives the prompt's logits.
std::vector<int32_t> generate_greedy(ReferenceModel& model, std::span<const int32_t> prompt, std::size_t n_new,
                                     MatrixF* prompt_logits = nullptr,
                                     const ForwardObserver* prompt_observer = nullptr);

}  // namespace bdsl::golden
