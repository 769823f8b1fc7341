// The weights of a BitNet b1.58 GGUF file in the form the CPU reference computes with: ternary
// projections unpacked from I2_S to int8 values -1/0/+1 plus the per-tensor scale, norms as
// fp32, and the F16 embedding kept as F16 and converted row by row when used.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "golden/reference_ops.h"
#include "models/bitnet_config.h"
#include "models/formats/ggml_type.h"
#include "models/formats/gguf.h"

namespace bdsl::golden {

// A [rows, cols] matrix stored as F16 or F32 (token_embd.weight, output.weight).
class DenseRows {
 public:
  DenseRows() = default;
  DenseRows(const models::GgufFile& file, const models::GgufTensorInfo& info);

  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  void row(std::size_t r, std::span<float> out) const;               // converted to fp32
  float dot_row(std::size_t r, std::span<const float> x) const;     // fp32, in index order

 private:
  models::GgmlType type_ = models::GgmlType::F32;
  std::size_t rows_ = 0;
  std::size_t cols_ = 0;
  std::vector<uint16_t> f16_;
  std::vector<float> f32_;
};

struct ReferenceLayer {
  std::vector<float> attn_norm, attn_sub_norm, ffn_norm, ffn_sub_norm;  // the sub-norms empty without them
  TernaryMatrix attn_q, attn_k, attn_v, attn_output;
  TernaryMatrix ffn_gate, ffn_up, ffn_down;
};

struct ReferenceWeights {
  models::BitNetConfig config;
  DenseRows token_embd;             // [vocab, dim]
  std::optional<DenseRows> output;  // output.weight when the file has one
  std::vector<float> output_norm;
  std::vector<ReferenceLayer> layers;

  // The LM head: output.weight, else the tied embedding.
  const DenseRows& lm_head() const { return output ? *output : token_embd; }

  // Validates the file (models::BitNetConfig::from_gguf) and copies everything out of it, so the
  // GgufFile may be closed afterwards. Throws naming the file and tensor on any problem.
  static ReferenceWeights load(const models::GgufFile& file);
};

}  // namespace bdsl::golden
