#include "golden/reference_weights.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "models/formats/i2s.h"
#include "models/formats/tq.h"
#include "models/numerics/half_float.h"

namespace bdsl::golden {

namespace {

using models::GgmlType;
using models::GgufFile;

[[noreturn]] void fail(const GgufFile& file, const std::string& tensor, const std::string& what) {
  throw std::runtime_error(file.name() + ": tensor '" + tensor + "': " + what);
}

std::vector<float> load_f32(const GgufFile& file, const std::string& name, std::size_t expected) {
  const auto& info = file.tensor(name);
  if (info.type != GgmlType::F32) fail(file, name, "expected type F32, found " + std::string(models::ggml_type_name(info.type)));
  if (info.n_elements != expected) {
    fail(file, name, "expected " + std::to_string(expected) + " elements, found " + std::to_string(info.n_elements));
  }
  std::vector<float> out(expected);
  std::memcpy(out.data(), file.tensor_data(info).data(), expected * sizeof(float));
  return out;
}

// GGUF dims of a projection are {in, out}: `out` rows of `in` values, row-major, which is also
// the element order I2_S packs.
TernaryMatrix load_ternary(const GgufFile& file, const std::string& name) {
  const auto& info = file.tensor(name);
  const bool tq = models::tq::is_tq(info.type);
  if (info.type != GgmlType::I2_S && !tq)
    fail(file, name, "expected type I2_S, TQ2_0 or TQ1_0, found " + std::string(models::ggml_type_name(info.type)));
  if (info.dims.size() != 2) fail(file, name, "expected 2 dims, found " + std::to_string(info.dims.size()));
  TernaryMatrix m;
  m.cols = info.dims[0];
  m.rows = info.dims[1];
  const auto data = file.tensor_data(info);
  try {
    if (tq) {
      auto decoded = models::tq::decode(info.type, data, info.n_elements, name);
      m.values = std::move(decoded.ternary);
      m.scale = decoded.scale;
    } else {
      m.values = models::i2s::unpack(data, info.n_elements);
      m.scale = models::i2s::scale(data, info.n_elements);
    }
  } catch (const std::exception& e) {
    fail(file, name, e.what());
  }
  m.scale *= models::projection_multiplier(file, name);  // mainline's `.scale`, folded as the device does
  return m;
}

ReferenceLayer load_layer(const GgufFile& file, const models::BitNetConfig& c, uint32_t l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  ReferenceLayer layer;
  layer.attn_norm = load_f32(file, p + "attn_norm.weight", c.dim);
  if (c.sub_norms) layer.attn_sub_norm = load_f32(file, p + "attn_sub_norm.weight", c.dim);
  layer.ffn_norm = load_f32(file, p + "ffn_norm.weight", c.dim);
  if (c.sub_norms) layer.ffn_sub_norm = load_f32(file, p + "ffn_sub_norm.weight", c.ffn_dim);
  layer.attn_q = load_ternary(file, p + "attn_q.weight");
  layer.attn_k = load_ternary(file, p + "attn_k.weight");
  layer.attn_v = load_ternary(file, p + "attn_v.weight");
  layer.attn_output = load_ternary(file, p + "attn_output.weight");
  layer.ffn_gate = load_ternary(file, p + "ffn_gate.weight");
  layer.ffn_up = load_ternary(file, p + "ffn_up.weight");
  layer.ffn_down = load_ternary(file, p + "ffn_down.weight");
  return layer;
}

}  // namespace

DenseRows::DenseRows(const GgufFile& file, const models::GgufTensorInfo& info) : type_(info.type) {
  const std::string name(info.name);
  if (info.dims.size() != 2) fail(file, name, "expected 2 dims, found " + std::to_string(info.dims.size()));
  cols_ = info.dims[0];
  rows_ = info.dims[1];
  const auto data = file.tensor_data(info);
  if (type_ == GgmlType::F16) {
    f16_.resize(info.n_elements);
    std::memcpy(f16_.data(), data.data(), f16_.size() * sizeof(uint16_t));
  } else if (type_ == GgmlType::F32) {
    f32_.resize(info.n_elements);
    std::memcpy(f32_.data(), data.data(), f32_.size() * sizeof(float));
  } else {
    fail(file, name, "expected type F16 or F32, found " + std::string(models::ggml_type_name(type_)));
  }
}

void DenseRows::row(std::size_t r, std::span<float> out) const {
  if (r >= rows_ || out.size() != cols_) throw std::out_of_range("DenseRows::row: row " + std::to_string(r) + " of " + std::to_string(rows_));
  for (std::size_t c = 0; c < cols_; ++c) {
    out[c] = type_ == GgmlType::F16 ? numerics::f16_to_f32(f16_[r * cols_ + c]) : f32_[r * cols_ + c];
  }
}

float DenseRows::dot_row(std::size_t r, std::span<const float> x) const {
  float acc = 0.0f;
  if (type_ == GgmlType::F16) {
    const uint16_t* w = f16_.data() + r * cols_;
    for (std::size_t c = 0; c < cols_; ++c) acc += numerics::f16_to_f32(w[c]) * x[c];
  } else {
    const float* w = f32_.data() + r * cols_;
    for (std::size_t c = 0; c < cols_; ++c) acc += w[c] * x[c];
  }
  return acc;
}

ReferenceWeights ReferenceWeights::load(const GgufFile& file) {
  ReferenceWeights w;
  w.config = models::BitNetConfig::from_gguf(file);
  w.token_embd = DenseRows(file, file.tensor("token_embd.weight"));
  if (const auto* out = file.find_tensor("output.weight")) w.output = DenseRows(file, *out);
  w.output_norm = load_f32(file, "output_norm.weight", w.config.dim);
  for (uint32_t l = 0; l < w.config.n_layers; ++l) w.layers.push_back(load_layer(file, w.config, l));
  return w;
}

}  // namespace bdsl::golden
