// BitNet b1.58 hyper-parameters read from GGUF metadata, and the validation of a file against
// them (every tensor present with the expected type and shape). Nothing is hard-coded: the 2B
// numbers come from the file.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "models/formats/ggml_type.h"
#include "models/formats/gguf.h"

namespace bdsl::models {

// Architectures accepted: "bitnet-b1.58" (current upload), "bitnet-25" (older), "bitnet"
// (1bitLLM's, and mainline's conversions), "llama" (LLaMA-shaped ternary models: Falcon3 1.58-bit,
// Llama3-8B-1.58).
bool is_bitnet_architecture(std::string_view architecture);

// Where the family's graphs differ (docs/model-family.md): each architecture's choices are one row
// of a table (architecture_traits), read by the config, the CPU reference, make-model and the GPU
// model (which says which it records).
enum class FfnActivation { Relu2, Silu };  // relu(gate)^2 * up, or silu(gate) * up
enum class RopeMode { Neox, Adjacent };    // pairs (i, i + rope_dim / 2), or (2i, 2i + 1)
const char* to_string(FfnActivation activation);
const char* to_string(RopeMode mode);

struct ArchitectureTraits {
  std::string_view name;          // general.architecture
  bool sub_norms;                 // attn_sub_norm before attn_output, ffn_sub_norm before ffn_down
  FfnActivation ffn_activation;   // unless the file's {arch}.hidden_activation says otherwise
  RopeMode rope_mode;
};
// The row of `architecture`; nullptr for one outside the family.
const ArchitectureTraits* architecture_traits(std::string_view architecture);
struct BitNetConfig;
// `config` takes the architecture's name and graph.
void set_architecture(BitNetConfig& config, const ArchitectureTraits& traits);

// Every violation found, one line each in what() (after the file name); violations() lists them
// one by one, each naming the key or tensor and expected vs found.
class BitNetConfigError : public std::runtime_error {
 public:
  BitNetConfigError(std::string_view file, std::vector<std::string> violations);
  const std::vector<std::string>& violations() const noexcept { return violations_; }

 private:
  std::vector<std::string> violations_;
};

struct BitNetConfig {
  std::string architecture;      // general.architecture
  uint32_t vocab_size = 0;       // {arch}.vocab_size, else the size of tokenizer.ggml.tokens
  uint32_t context_length = 0;   // {arch}.context_length
  uint32_t dim = 0;              // {arch}.embedding_length
  uint32_t n_layers = 0;         // {arch}.block_count
  uint32_t ffn_dim = 0;          // {arch}.feed_forward_length
  uint32_t rope_dim = 0;         // {arch}.rope.dimension_count (default head_dim)
  uint32_t n_heads = 0;          // {arch}.attention.head_count
  uint32_t n_kv_heads = 0;       // {arch}.attention.head_count_kv (default n_heads)
  uint32_t head_dim = 0;         // dim / n_heads
  float rms_norm_eps = 0.0f;     // {arch}.attention.layer_norm_rms_epsilon
  float rope_freq_base = 10000.0f;  // {arch}.rope.freq_base (llama.cpp's default when absent)
  bool tied_output = true;       // no output.weight: logits use token_embd.weight
  // The graph (architecture_traits; the activation may come from {arch}.hidden_activation,
  // "relu2" or "silu").
  bool sub_norms = true;
  FfnActivation ffn_activation = FfnActivation::Relu2;
  RopeMode rope_mode = RopeMode::Neox;

  uint32_t kv_dim() const noexcept { return head_dim * n_kv_heads; }
  uint32_t gqa_group() const noexcept { return n_kv_heads ? n_heads / n_kv_heads : 0; }

  // Reads the metadata and validates it alone (no tensors). Throws BitNetConfigError.
  static BitNetConfig from_metadata(const GgufFile& file);
  // from_metadata, validate_bitnet_tensors and validate_bitnet_i2s_codes: what a loader calls.
  static BitNetConfig from_gguf(const GgufFile& file);
};

// One tensor a BitNet file must (or may) hold. dims innermost first, as in GGUF: a projection
// with `in` inputs and `out` outputs is {in, out}; token_embd.weight is {dim, vocab}.
struct BitNetTensorSpec {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> dims;
  bool required = true;
};

// The tensors of a model with this config, in the order llama.cpp writes them: token_embd,
// output_norm, (output.weight when !tied_output), then blk.N.* for every layer (the sub-norms
// where the architecture has them). Writers of synthetic models can use it as the list of what to
// write. A projection (I2_S) may be followed by its optional `.scale` (mainline llama.cpp's
// multiplier: one F32, projection_multiplier).
std::vector<BitNetTensorSpec> bitnet_tensor_specs(const BitNetConfig& config);

// The multiplier mainline llama.cpp applies to a projection's output (`blk.N.attn_q.scale` for
// `blk.N.attn_q.weight`, ...), 1 where the file has none. The loaders fold it into the
// projection's per-tensor scale: y = acc / s * (scale * multiplier).
float projection_multiplier(const GgufFile& file, std::string_view weight_name);
// "blk.N.attn_q.weight" -> "blk.N.attn_q.scale": the multiplier's tensor name.
std::string projection_scale_name(std::string_view weight_name);

// Checks every spec against the file: present, expected type, expected shape; output.weight is
// optional (F16 or F32), and a projection (I2_S) may be TQ1_0 or TQ2_0 (models/formats/tq.h).
// Throws BitNetConfigError listing every violation.
void validate_bitnet_tensors(const BitNetConfig& config, const GgufFile& file);

// Scans every I2_S tensor's codes (i2s::validate): a code of 3 is reported with the tensor name
// and byte offset. Reads the whole ternary payload (~0.5 GB for the 2B model; fast, word-wise).
// A TQ1_0/TQ2_0 tensor is checked as it will be converted (tq::check): a field of 3 or blocks of
// different scales are reported the same way.
void validate_bitnet_i2s_codes(const GgufFile& file);

}  // namespace bdsl::models
