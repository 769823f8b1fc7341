#include "golden/reference_model.h"

#include "models/numerics/half_float.h"

#include <stdexcept>
#include <string>

#include "golden/parallel.h"

namespace bdsl::golden {

namespace {

void observe(const ForwardObserver* obs, std::string_view name, const MatrixF& m) {
  if (obs && obs->on_tensor) obs->on_tensor(name, m);
}

std::string layer_name(std::string_view base, std::size_t layer) {
  std::string s(base);
  s += '-';
  s += std::to_string(layer);
  return s;
}

MatrixF rms_norm_rows(const MatrixF& x, std::span<const float> weight, float eps) {
  MatrixF out(x.rows, x.cols);
  for (std::size_t t = 0; t < x.rows; ++t) rms_norm(x.row(t), weight, eps, out.row(t));
  return out;
}

MatrixF add(const MatrixF& a, const MatrixF& b) {
  MatrixF out(a.rows, a.cols);
  for (std::size_t i = 0; i < a.data.size(); ++i) out.data[i] = a.data[i] + b.data[i];
  return out;
}

// Every row of x through one ternary projection; reports the accumulators as "<weight>_acc-N".
MatrixF project(const TernaryMatrix& w, const MatrixF& x, std::string_view weight_name, std::size_t layer,
                const ForwardObserver* obs) {
  const bool want_acc = obs && obs->on_accumulators;
  MatrixF y(x.rows, w.rows);
  MatrixI acc(want_acc ? x.rows : 0, w.rows);
  for (std::size_t t = 0; t < x.rows; ++t) {
    bitlinear(w, x.row(t), y.row(t), want_acc ? acc.row(t) : std::span<int32_t>{});
  }
  if (want_acc) obs->on_accumulators(layer_name(std::string(weight_name) + "_acc", layer), acc);
  return y;
}

// RoPE on every head of every row; row t is at position first_pos + t.
void rope_rows(MatrixF& m, std::size_t head_dim, std::size_t first_pos, const models::BitNetConfig& c) {
  for (std::size_t t = 0; t < m.rows; ++t) {
    for (std::size_t h = 0; h < m.cols / head_dim; ++h) {
      const auto head = m.row(t).subspan(h * head_dim, head_dim);
      const auto pos = static_cast<int64_t>(first_pos + t);
      if (c.rope_mode == models::RopeMode::Neox) rope_neox(head, pos, c.rope_dim, c.rope_freq_base);
      else rope_adjacent(head, pos, c.rope_dim, c.rope_freq_base);
    }
  }
}

// The KV cache holds F16, as bitnet.cpp's (llama.cpp's default cache type): K and V are rounded to
// half precision when stored, so attention reads exactly what a faithful runtime reads.
void append_rows_f16(MatrixF& cache, const MatrixF& rows) {
  if (cache.cols == 0) cache.cols = rows.cols;
  for (float v : rows.data) cache.data.push_back(numerics::f16_to_f32(numerics::f32_to_f16(v)));
  cache.rows += rows.rows;
}

}  // namespace

ReferenceModel::ReferenceModel(const ReferenceWeights& weights)
    : weights_(&weights), cache_(weights.layers.size()) {}

void ReferenceModel::reset() {
  for (auto& c : cache_) c = LayerCache{};
  n_past_ = 0;
}

MatrixF ReferenceModel::forward(std::span<const int32_t> tokens, const ForwardObserver* obs) {
  const auto& c = config();
  if (n_past_ + tokens.size() > c.context_length) {
    throw std::length_error("reference model: " + std::to_string(n_past_ + tokens.size()) +
                            " positions exceed the context length " + std::to_string(c.context_length));
  }
  MatrixF x = embed(tokens);
  observe(obs, "inp_embd", x);
  for (std::size_t l = 0; l < weights_->layers.size(); ++l) {
    const MatrixF h = add(x, attention_block(l, x, obs));
    observe(obs, layer_name("ffn_inp", l), h);
    x = add(h, ffn_block(l, h, obs));
    observe(obs, layer_name("l_out", l), x);
  }
  n_past_ += tokens.size();
  return logits(x, obs);
}

MatrixF ReferenceModel::embed(std::span<const int32_t> tokens) const {
  const DenseRows& table = weights_->token_embd;
  MatrixF x(tokens.size(), table.cols());
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || static_cast<std::size_t>(tokens[t]) >= table.rows()) {
      throw std::out_of_range("reference model: token id " + std::to_string(tokens[t]) +
                              " is outside the vocabulary (0.." + std::to_string(table.rows() - 1) + ")");
    }
    table.row(static_cast<std::size_t>(tokens[t]), x.row(t));
  }
  return x;
}

MatrixF ReferenceModel::attention_block(std::size_t l, const MatrixF& x, const ForwardObserver* obs) {
  const auto& c = config();
  const ReferenceLayer& w = weights_->layers[l];
  const MatrixF n = rms_norm_rows(x, w.attn_norm, c.rms_norm_eps);
  observe(obs, layer_name("attn_norm", l), n);
  MatrixF q = project(w.attn_q, n, "attn_q", l, obs);
  MatrixF k = project(w.attn_k, n, "attn_k", l, obs);
  const MatrixF v = project(w.attn_v, n, "attn_v", l, obs);
  rope_rows(q, c.head_dim, n_past_, c);
  rope_rows(k, c.head_dim, n_past_, c);
  observe(obs, layer_name("Qcur", l), q);
  observe(obs, layer_name("Kcur", l), k);
  observe(obs, layer_name("Vcur", l), v);
  append_rows_f16(cache_[l].k, k);
  append_rows_f16(cache_[l].v, v);

  MatrixF kqv;
  attention(q, cache_[l].k, cache_[l].v, n_past_, {c.n_heads, c.n_kv_heads, c.head_dim}, kqv);
  observe(obs, layer_name("kqv_out", l), kqv);
  // BitNet's sub-norm before the projection; a LLaMA-shaped graph quantizes the output as it is.
  MatrixF sub;
  if (c.sub_norms) {
    sub = rms_norm_rows(kqv, w.attn_sub_norm, c.rms_norm_eps);
    observe(obs, layer_name("attn_sub_norm", l), sub);
  }
  MatrixF o = project(w.attn_output, c.sub_norms ? sub : kqv, "attn_output", l, obs);
  observe(obs, layer_name("attn_o_out", l), o);
  return o;
}

MatrixF ReferenceModel::ffn_block(std::size_t l, const MatrixF& h, const ForwardObserver* obs) const {
  const auto& c = config();
  const ReferenceLayer& w = weights_->layers[l];
  const MatrixF n = rms_norm_rows(h, w.ffn_norm, c.rms_norm_eps);
  observe(obs, layer_name("ffn_norm", l), n);
  const MatrixF gate = project(w.ffn_gate, n, "ffn_gate", l, obs);
  const MatrixF up = project(w.ffn_up, n, "ffn_up", l, obs);
  observe(obs, layer_name("ffn_gate", l), gate);
  observe(obs, layer_name("ffn_up", l), up);
  MatrixF act(gate.rows, gate.cols);
  for (std::size_t t = 0; t < gate.rows; ++t) {
    if (c.ffn_activation == models::FfnActivation::Relu2) relu2_gate(gate.row(t), up.row(t), act.row(t));
    else silu_gate(gate.row(t), up.row(t), act.row(t));
  }
  observe(obs, layer_name("ffn_out", l), act);
  MatrixF sub;
  if (c.sub_norms) {
    sub = rms_norm_rows(act, w.ffn_sub_norm, c.rms_norm_eps);
    observe(obs, layer_name("ffn_sub_norm", l), sub);
  }
  MatrixF down = project(w.ffn_down, c.sub_norms ? sub : act, "ffn_down", l, obs);
  observe(obs, layer_name("ffn_down", l), down);
  return down;
}

MatrixF ReferenceModel::logits(const MatrixF& x, const ForwardObserver* obs) const {
  const MatrixF n = rms_norm_rows(x, weights_->output_norm, config().rms_norm_eps);
  observe(obs, "result_norm", n);
  const DenseRows& head = weights_->lm_head();
  MatrixF out(x.rows, head.rows());
  for (std::size_t t = 0; t < x.rows; ++t) {
    parallel_for(head.rows(), head.cols(), [&](std::size_t begin, std::size_t end) {
      for (std::size_t v = begin; v < end; ++v) out.at(t, v) = head.dot_row(v, n.row(t));
    });
  }
  observe(obs, "result_output", out);
  return out;
}

int32_t argmax(std::span<const float> values) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < values.size(); ++i) {
    if (values[i] > values[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

std::vector<int32_t> generate_greedy(ReferenceModel& model, std::span<const int32_t> prompt, std::size_t n_new,
                                     MatrixF* prompt_logits, const ForwardObserver* prompt_observer) {
  if (prompt.empty()) throw std::invalid_argument("generate_greedy: the prompt is empty");
  model.reset();
  MatrixF logits = model.forward(prompt, prompt_observer);
  if (prompt_logits) *prompt_logits = logits;
  std::vector<int32_t> out;
  while (out.size() < n_new) {
    out.push_back(argmax(logits.row(logits.rows - 1)));
    if (out.size() < n_new) logits = model.forward(std::span<const int32_t>(&out.back(), 1));
  }
  return out;
}

}  // namespace bdsl::golden
