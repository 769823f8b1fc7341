// The operations of BitNet b1.58 on the CPU, each as docs/format.md states it: readable first, exact
// where the format is exact (int8 activations, int32 ternary accumulators), fp32 elsewhere, in a
// fixed evaluation order so results are reproducible bit for bit on one platform.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "golden/matrix.h"

namespace bdsl::golden {

// x / sqrt(mean(x^2) + eps) * weight as ggml computes it: the squares (each rounded to fp32)
// summed in double from the first element on, the mean rounded to fp32, 1.0f / sqrtf(mean + eps),
// then (x * inv) * weight. The GPU kernels give the same scale where the device has f64
// (ops/common/norm_scale.h).
void rms_norm(std::span<const float> x, std::span<const float> weight, float eps, std::span<float> out);

// Per-token absmax quantization: s = 127 / max(max|x|, 1e-5), q = clamp(round(x * s), -128, 127)
// with round to nearest, ties to even (std::nearbyint in the default rounding mode). Returns s.
inline constexpr float kActivationAbsMaxFloor = 1e-5f;
float quantize_activations(std::span<const float> x, std::span<int8_t> q);

// A ternary projection: out x in values in {-1, 0, +1} (row-major, one row per output) and the
// per-tensor scale. I2_S codes c in {0, 1, 2} are values c - 1.
struct TernaryMatrix {
  std::size_t rows = 0;  // output features
  std::size_t cols = 0;  // input features
  std::vector<int8_t> values;
  float scale = 0.0f;

  std::span<const int8_t> row(std::size_t r) const { return {values.data() + r * cols, cols}; }
};

// sum_i w_i * q_i, exact in int32 (|sum| <= 128 * cols; cols < 2^24 is always safe).
int32_t ternary_dot(std::span<const int8_t> w, std::span<const int8_t> q);

// One token through a projection: acc[r] = ternary_dot(W[r], q(x)), y[r] = acc[r] / s * W.scale.
// `acc` may be empty when the caller does not want the accumulators.
void bitlinear(const TernaryMatrix& w, std::span<const float> x, std::span<float> y, std::span<int32_t> acc);

// NeoX rotary embedding of one head vector in place: pairs (i, i + rope_dim/2) for
// i < rope_dim/2 turn by pos * base^(-2i/rope_dim); elements from rope_dim on are untouched.
// The angle and its cosine and sine are computed in double, then rounded to float.
void rope_neox(std::span<float> head, int64_t pos, std::size_t rope_dim, float base);

// The same rotations on adjacent pairs (2i, 2i + 1) (ggml's NORM mode: LLaMA-shaped files, whose
// converter permuted Q and K for it).
void rope_adjacent(std::span<float> head, int64_t pos, std::size_t rope_dim, float base);

// rope_rotation / rope_table: models/numerics/rope.h (the GPU's table comes from the same code).
// relu(gate)^2 * up, elementwise.
void relu2_gate(std::span<const float> gate, std::span<const float> up, std::span<float> out);
// silu(gate) * up = gate / (1 + exp(-gate)) * up, elementwise in fp32 (ggml's silu).
void silu_gate(std::span<const float> gate, std::span<const float> up, std::span<float> out);

// Causal grouped-query attention of the rows of q (at positions first_pos, first_pos + 1, ...)
// over the cached keys and values of positions 0..pos (inclusive). q: [tokens, n_heads*head_dim],
// k_cache / v_cache: [>= last pos + 1, n_kv_heads*head_dim]; query head h reads KV head
// h / (n_heads / n_kv_heads); q is rounded to F16 (as bitnet.cpp multiplies it with the F16
// keys), scores are scaled by 1/sqrt(head_dim); softmax in fp32.
struct AttentionShape {
  std::size_t n_heads;
  std::size_t n_kv_heads;
  std::size_t head_dim;
};
void attention(const MatrixF& q, const MatrixF& k_cache, const MatrixF& v_cache, std::size_t first_pos,
               const AttentionShape& shape, MatrixF& out);

}  // namespace bdsl::golden
