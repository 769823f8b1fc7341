#include "models/bitnet/op_local_check.h"

#include <fmt/format.h>

#include <stdexcept>

#include "golden/matrix.h"
#include "golden/reference_ops.h"
#include "models/numerics/half_float.h"

namespace bdsl::bitnet {
namespace {

using Vec = std::vector<float>;

const Vec& dumped(const StepDumps& gpu, const std::string& name) {
  auto it = gpu.find(name);
  if (it == gpu.end()) throw std::logic_error("op-local check: the decode graph dumped no " + name);
  return it->second;
}

Vec rms_norm(const Vec& x, const Vec& weight, float eps) {
  Vec out(x.size());
  golden::rms_norm(x, weight, eps, out);
  return out;
}

Vec project(const golden::TernaryMatrix& w, const Vec& x) {
  Vec y(w.rows);
  golden::bitlinear(w, x, y, {});
  return y;
}

Vec add(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

void append(std::map<std::string, Vec>& expected, const std::string& name, const Vec& v) {
  auto& e = expected[name];
  e.insert(e.end(), v.begin(), v.end());
}

}  // namespace

OpLocalReference::OpLocalReference(const models::GgufFile& file) : w_(golden::ReferenceWeights::load(file)) {}

void OpLocalReference::expect(uint32_t pos, const StepDumps& gpu, const std::vector<std::vector<float>>& k_cache,
                              const std::vector<std::vector<float>>& v_cache, std::map<std::string, Vec>& expected) const {
  const auto& c = w_.config;
  const float eps = c.rms_norm_eps;
  const size_t kv = c.kv_dim();
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const golden::ReferenceLayer& w = w_.layers[l];
    const auto name = [&](const char* what) { return fmt::format("{}-{}", what, l); };
    const Vec& x = dumped(gpu, l == 0 ? std::string("inp_embd") : fmt::format("l_out-{}", l - 1));
    // QKV and RoPE from the layer's input; K and V as the F16 cache row at pos.
    const Vec n = rms_norm(x, w.attn_norm, eps);
    Vec q = project(w.attn_q, n), k = project(w.attn_k, n);
    Vec v = project(w.attn_v, n);
    const auto rope = c.rope_mode == models::RopeMode::Neox ? golden::rope_neox : golden::rope_adjacent;
    for (size_t h = 0; h < c.n_heads; ++h) rope(std::span(q).subspan(h * c.head_dim, c.head_dim), pos, c.rope_dim, c.rope_freq_base);
    for (size_t h = 0; h < c.n_kv_heads; ++h) rope(std::span(k).subspan(h * c.head_dim, c.head_dim), pos, c.rope_dim, c.rope_freq_base);
    // q at F16 precision as RoPE stores it (bitnet.cpp's rounding point before q.K).
    for (float& e : q) e = numerics::f16_to_f32(numerics::f32_to_f16(e));
    for (float& e : k) e = numerics::f16_to_f32(numerics::f32_to_f16(e));
    for (float& e : v) e = numerics::f16_to_f32(numerics::f32_to_f16(e));
    append(expected, name("Qcur"), q);
    append(expected, name("Kcur"), k);
    append(expected, name("Vcur"), v);

    // Attention of the GPU's q over the GPU's cache rows 0..pos.
    if (k_cache.at(l).size() < (pos + 1) * kv || v_cache.at(l).size() < (pos + 1) * kv)
      throw std::logic_error("op-local check: the KV cache is shorter than the position");
    golden::MatrixF gq(1, c.n_heads * c.head_dim), gk(pos + 1, kv), gv(pos + 1, kv), att;
    const Vec& q_gpu = dumped(gpu, name("Qcur"));
    std::copy(q_gpu.begin(), q_gpu.end(), gq.data.begin());
    std::copy(k_cache[l].begin(), k_cache[l].begin() + int64_t((pos + 1) * kv), gk.data.begin());
    std::copy(v_cache[l].begin(), v_cache[l].begin() + int64_t((pos + 1) * kv), gv.data.begin());
    golden::attention(gq, gk, gv, pos, {c.n_heads, c.n_kv_heads, c.head_dim}, att);
    append(expected, name("kqv_out"), att.data);

    // attn_output (+ residual) from the GPU's attention output and the layer's input.
    // Each projection's input, normalized by its sub-norm where the graph has them.
    auto sub_normed = [&](const Vec& in, const Vec& weight) { return c.sub_norms ? rms_norm(in, weight, eps) : in; };
    const Vec o = project(w.attn_output, sub_normed(dumped(gpu, name("kqv_out")), w.attn_sub_norm));
    append(expected, name("ffn_inp"), add(x, o));

    // gate/up from the GPU's residual after attention; ffn_down from the GPU's product.
    const Vec& h = dumped(gpu, name("ffn_inp"));
    const Vec m = rms_norm(h, w.ffn_norm, eps);
    const Vec gate = project(w.ffn_gate, m), up = project(w.ffn_up, m);
    Vec act(gate.size());
    if (c.ffn_activation == models::FfnActivation::Relu2)
      golden::relu2_gate(gate, up, act);
    else
      golden::silu_gate(gate, up, act);
    append(expected, name("ffn_out"), act);
    const Vec down = project(w.ffn_down, sub_normed(dumped(gpu, name("ffn_out")), w.ffn_sub_norm));
    append(expected, name("l_out"), add(h, down));
  }
  // The final norm from the GPU's last layer output; the logits from the GPU's normed vector.
  const Vec norm = rms_norm(dumped(gpu, fmt::format("l_out-{}", c.n_layers - 1)), w_.output_norm, eps);
  append(expected, "result_norm", norm);
  const Vec& gpu_norm = dumped(gpu, "result_norm");
  const golden::DenseRows& head = w_.lm_head();
  Vec logits(head.rows());
  for (size_t r = 0; r < head.rows(); ++r) logits[r] = head.dot_row(r, gpu_norm);
  append(expected, "result_output", logits);
}

}  // namespace bdsl::bitnet
