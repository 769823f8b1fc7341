// Synthetic BitNet b1.58 models: files with the real key names, tensor names, types and layout
// (I2_S projections, F32 norms, F16 token_embd, tied LM head, architecture "bitnet-b1.58"), a
// byte-level BPE vocabulary, and weights drawn from a seed with SplitMix64, so the same options
// give the same bytes on every machine. Weight scales keep activations in a sane range: a ternary
// projection with `in` inputs is scaled by 1/sqrt(2/3 * in), so each output has roughly unit RMS
// for unit-RMS normalized inputs, and the residual stream grows only like sqrt(layers).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "models/bitnet_config.h"
#include "models/formats/gguf_writer.h"

namespace bdsl::golden {

// The seed used when none is given, and the one golden/data/tiny is made with: 5 is the first
// small seed whose greedy continuation of the golden prompt does not collapse at once into one
// repeated token (random models love to repeat), so the KV-cache path is exercised on varied tokens.
inline constexpr uint64_t kDefaultSyntheticSeed = 5;

struct SyntheticModelOptions {
  std::string preset = "custom";  // recorded in the file; "tiny" and "2b" come from synthetic_preset
  // general.architecture, and so the graph (models::architecture_traits): "bitnet-b1.58",
  // "bitnet-25", "bitnet" (SiLU) or "llama" (no sub-norms, SiLU, adjacent-pair RoPE).
  std::string architecture = "bitnet-b1.58";
  uint32_t dim = 512;
  uint32_t n_layers = 4;
  uint32_t n_heads = 8;
  uint32_t n_kv_heads = 2;
  uint32_t ffn_dim = 1536;
  uint32_t vocab_size = 1000;
  uint32_t context_length = 256;
  float rope_freq_base = 10000.0f;
  float rms_norm_eps = 1e-5f;
  uint64_t seed = kDefaultSyntheticSeed;
  // The projections' type: I2_S (bitnet.cpp's), or TQ2_0 / TQ1_0 (mainline llama.cpp's, whose
  // blocks of 256 need dim and FFN multiples of 256, and whose scales are F16). With f16_scales an
  // I2_S file takes the F16-rounded scales too: the three types then hold the same weights.
  models::GgmlType weight_type = models::GgmlType::I2_S;
  bool f16_scales = false;
  bool untied_output = false;  // an output.weight (F16) of its own rather than the tied embedding
  // Not 1: every projection's scale is divided by it and a `.scale` tensor (mainline llama.cpp's
  // multiplier, models::projection_multiplier) holding it is written after the projection. A power
  // of two gives the same weights as 1, exactly.
  float projection_multiplier = 1.0f;
  // tokenizer.ggml.model: "gpt2" (byte-level BPE, as LLaMA 3 and BitNet 2B-4T) or "llama" (the same
  // vocabulary as SentencePiece, as 1bitLLM's files: golden::make_synthetic_sentencepiece_vocab).
  std::string tokenizer = "gpt2";
};

// "tiny": dim 512, 4 layers, 8/2 heads, FFN 1536, vocab 1000, ctx 256, RoPE base 10000 (a low
// base so positions visibly matter in a short prompt); about 5 MB.
// "2b": BitNet b1.58 2B-4T's shape (docs/format.md): dim 2560, 30 layers, 20/5 heads, FFN 6912, vocab
// 128256, ctx 4096, RoPE base 500000; about 1.2 GB.
// "llama3-8b", "falcon3-1b", "falcon3-3b", "falcon3-7b", "falcon3-10b": architecture `llama` at the
// shapes of docs/model-family.md's table (Meta-Llama-3-8B's; Falcon3's head size 256, vocab 131072,
// RoPE base 1000042), with an output.weight of their own; 2.4 to 4 GB. "bitnet-large": 1bitLLM's
// `bitnet` (SiLU, sub-norms) at dim 1536, 24 layers, 16 heads of 96, FFN 4096, vocab 32002.
// Throws std::invalid_argument naming the known presets for any other name.
SyntheticModelOptions synthetic_preset(std::string_view name);

// The config a file made with these options declares. Throws std::invalid_argument naming the
// option and what it must satisfy (heads divide dim, KV heads divide heads, dim and FFN multiples
// of 128 for I2_S, even head size, context >= 1).
models::BitNetConfig synthetic_config(const SyntheticModelOptions& options);

// Metadata, tokenizer and tensors (data produced at write time, tensor by tensor).
models::GgufWriter make_synthetic_model(const SyntheticModelOptions& options);
void write_synthetic_model(const SyntheticModelOptions& options, const std::filesystem::path& path);

}  // namespace bdsl::golden
