#include "golden/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "golden/parallel.h"
#include "models/numerics/half_float.h"
#include "models/numerics/rope.h"

namespace bdsl::golden {

namespace {

void check_same(std::size_t a, std::size_t b, const char* what) {
  if (a != b) {
    throw std::invalid_argument(std::string("reference op: ") + what + ": " + std::to_string(a) +
                                " vs " + std::to_string(b));
  }
}

}  // namespace

void rms_norm(std::span<const float> x, std::span<const float> weight, float eps, std::span<float> out) {
  check_same(x.size(), weight.size(), "rms_norm weight length");
  check_same(x.size(), out.size(), "rms_norm output length");
  // ggml's rms_norm (bitnet.cpp's rounding points): each square rounded to f32, summed in double
  // in order, the mean rounded to f32, then 1.0f / sqrtf(mean + eps).
  double sum_sq = 0.0;
  for (float v : x) {
    const float sq = v * v;
    sum_sq += static_cast<double>(sq);
  }
  const float mean = static_cast<float>(sum_sq / static_cast<double>(x.size()));
  const float inv = 1.0f / std::sqrt(mean + eps);
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] * inv * weight[i];
}

float quantize_activations(std::span<const float> x, std::span<int8_t> q) {
  check_same(x.size(), q.size(), "quantize_activations output length");
  float absmax = 0.0f;
  for (float v : x) absmax = std::max(absmax, std::fabs(v));
  const float s = 127.0f / std::max(absmax, kActivationAbsMaxFloor);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float r = std::nearbyint(x[i] * s);
    q[i] = static_cast<int8_t>(std::clamp(r, -128.0f, 127.0f));
  }
  return s;
}

int32_t ternary_dot(std::span<const int8_t> w, std::span<const int8_t> q) {
  check_same(w.size(), q.size(), "ternary_dot lengths");
  int32_t acc = 0;
  for (std::size_t i = 0; i < w.size(); ++i) acc += int32_t(w[i]) * int32_t(q[i]);
  return acc;
}

void bitlinear(const TernaryMatrix& w, std::span<const float> x, std::span<float> y, std::span<int32_t> acc) {
  check_same(x.size(), w.cols, "bitlinear input length");
  check_same(y.size(), w.rows, "bitlinear output length");
  if (!acc.empty()) check_same(acc.size(), w.rows, "bitlinear accumulator length");
  std::vector<int8_t> q(x.size());
  const float s = quantize_activations(x, q);
  parallel_for(w.rows, w.cols, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      const int32_t a = ternary_dot(w.row(r), q);
      if (!acc.empty()) acc[r] = a;
      y[r] = static_cast<float>(a) / s * w.scale;
    }
  });
}

void rope_neox(std::span<float> head, int64_t pos, std::size_t rope_dim, float base) {
  if (rope_dim > head.size() || rope_dim % 2 != 0) {
    throw std::invalid_argument("rope_neox: rope_dim " + std::to_string(rope_dim) +
                                " must be even and at most the head size " + std::to_string(head.size()));
  }
  const std::size_t half = rope_dim / 2;
  for (std::size_t i = 0; i < half; ++i) {
    const auto [c, s] = numerics::rope_rotation(pos, i, rope_dim, base);
    const float x0 = head[i];
    const float x1 = head[i + half];
    head[i] = x0 * c - x1 * s;
    head[i + half] = x0 * s + x1 * c;
  }
}

void rope_adjacent(std::span<float> head, int64_t pos, std::size_t rope_dim, float base) {
  if (rope_dim > head.size() || rope_dim % 2 != 0) {
    throw std::invalid_argument("rope_adjacent: rope_dim " + std::to_string(rope_dim) +
                                " must be even and at most the head size " + std::to_string(head.size()));
  }
  for (std::size_t i = 0; i < rope_dim / 2; ++i) {
    const auto [c, s] = numerics::rope_rotation(pos, i, rope_dim, base);
    const float x0 = head[2 * i];
    const float x1 = head[2 * i + 1];
    head[2 * i] = x0 * c - x1 * s;
    head[2 * i + 1] = x0 * s + x1 * c;
  }
}

void silu_gate(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  check_same(gate.size(), up.size(), "silu_gate lengths");
  check_same(gate.size(), out.size(), "silu_gate output length");
  for (std::size_t i = 0; i < gate.size(); ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void relu2_gate(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  check_same(gate.size(), up.size(), "relu2_gate lengths");
  check_same(gate.size(), out.size(), "relu2_gate output length");
  for (std::size_t i = 0; i < gate.size(); ++i) {
    const float g = std::max(gate[i], 0.0f);
    out[i] = g * g * up[i];
  }
}

namespace {

// One query head at absolute position `pos` against KV head `kv` of the cache.
void attend_one_head(std::span<const float> q, const MatrixF& k_cache, const MatrixF& v_cache, std::size_t pos,
                     std::size_t kv, std::size_t head_dim, std::span<float> out) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  // q rounded to F16 first: bitnet.cpp (ggml's CPU path) multiplies it with the F16 keys as F16.
  std::vector<float> qh(head_dim);
  for (std::size_t d = 0; d < head_dim; ++d) qh[d] = numerics::f16_to_f32(numerics::f32_to_f16(q[d]));
  std::vector<float> scores(pos + 1);
  float max_score = -INFINITY;
  for (std::size_t t = 0; t <= pos; ++t) {
    const float* k = k_cache.row(t).data() + kv * head_dim;
    float dot = 0.0f;
    for (std::size_t d = 0; d < head_dim; ++d) dot += qh[d] * k[d];
    scores[t] = dot * scale;
    max_score = std::max(max_score, scores[t]);
  }
  float sum = 0.0f;
  for (float& s : scores) {
    s = std::exp(s - max_score);
    sum += s;
  }
  std::fill(out.begin(), out.end(), 0.0f);
  for (std::size_t t = 0; t <= pos; ++t) {
    const float w = scores[t] / sum;
    const float* v = v_cache.row(t).data() + kv * head_dim;
    for (std::size_t d = 0; d < head_dim; ++d) out[d] += w * v[d];
  }
}

}  // namespace

void attention(const MatrixF& q, const MatrixF& k_cache, const MatrixF& v_cache, std::size_t first_pos,
               const AttentionShape& shape, MatrixF& out) {
  const std::size_t hd = shape.head_dim;
  check_same(q.cols, shape.n_heads * hd, "attention query width");
  check_same(k_cache.cols, shape.n_kv_heads * hd, "attention key width");
  check_same(v_cache.cols, shape.n_kv_heads * hd, "attention value width");
  if (shape.n_kv_heads == 0 || shape.n_heads % shape.n_kv_heads != 0) {
    throw std::invalid_argument("attention: KV heads must divide query heads");
  }
  if (first_pos + q.rows > k_cache.rows || first_pos + q.rows > v_cache.rows) {
    throw std::invalid_argument("attention: the cache does not hold every position up to the last query");
  }
  out = MatrixF(q.rows, q.cols);
  const std::size_t group = shape.n_heads / shape.n_kv_heads;
  for (std::size_t t = 0; t < q.rows; ++t) {
    for (std::size_t h = 0; h < shape.n_heads; ++h) {
      attend_one_head(q.row(t).subspan(h * hd, hd), k_cache, v_cache, first_pos + t, h / group, hd,
                      out.row(t).subspan(h * hd, hd));
    }
  }
}

}  // namespace bdsl::golden
