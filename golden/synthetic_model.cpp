#include "golden/synthetic_model.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "golden/splitmix.h"
#include "golden/synthetic_vocab.h"
#include "models/formats/i2s.h"
#include "models/formats/tq.h"
#include "models/numerics/half_float.h"

namespace bdsl::golden {

namespace {

using models::GgmlType;

constexpr uint32_t kFileTypeI2S = 40;  // general.file_type of the real file
constexpr uint32_t kFileTypeTQ1 = 36, kFileTypeTQ2 = 37;  // llama.cpp's LLAMA_FTYPE_MOSTLY_TQ1_0 / TQ2_0

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("synthetic model: " + what);
}

// Ternary values with P(-1) = P(0) = P(+1) = 1/3, four per 64-bit draw ((16-bit chunk * 3) >> 16).
void fill_ternary(SplitMix64& rng, std::span<int8_t> out) {
  for (std::size_t i = 0; i < out.size(); i += 4) {
    const uint64_t r = rng.next();
    for (std::size_t k = 0; k < 4 && i + k < out.size(); ++k) {
      const uint64_t chunk = (r >> (16 * k)) & 0xFFFF;
      out[i + k] = static_cast<int8_t>(int((chunk * 3) >> 16) - 1);
    }
  }
}

// The same values and scale whatever the type (TQ types, and I2_S with f16_scales, round the scale
// to F16).
models::GgufWriter::TensorFill ternary_fill(uint64_t seed, std::string name, uint64_t in, uint64_t n, GgmlType type,
                                            bool f16_scales, float multiplier) {
  return [seed, name = std::move(name), in, n, type, f16_scales, multiplier](std::span<std::byte> out) {
    SplitMix64 rng = stream_for(seed, name);
    std::vector<int8_t> values(n);
    fill_ternary(rng, values);
    float scale = static_cast<float>(1.0 / std::sqrt(2.0 / 3.0 * double(in)));
    if (f16_scales) scale = numerics::f16_to_f32(numerics::f32_to_f16(scale));
    scale /= multiplier;
    if (type == GgmlType::I2_S) return models::i2s::pack_into(values, scale, out);
    const auto packed = models::tq::encode(type, values, scale);
    std::memcpy(out.data(), packed.data(), packed.size());
  };
}

// Norm weights in [0.75, 1.25): near one, but not one, so a missing multiply shows.
models::GgufWriter::TensorFill norm_fill(uint64_t seed, std::string name, uint64_t n) {
  return [seed, name = std::move(name), n](std::span<std::byte> out) {
    SplitMix64 rng = stream_for(seed, name);
    for (uint64_t i = 0; i < n; ++i) {
      const float w = 1.0f + 0.25f * rng.symmetric();
      std::memcpy(out.data() + i * sizeof(float), &w, sizeof(float));
    }
  };
}

// Embedding values uniform with standard deviation 4/sqrt(dim): as the tied LM head they give
// logits with a standard deviation of about 4 for a unit-RMS final state (distinct, not saturated).
models::GgufWriter::TensorFill embedding_fill(uint64_t seed, std::string name, uint64_t dim, uint64_t n) {
  return [seed, name = std::move(name), dim, n](std::span<std::byte> out) {
    SplitMix64 rng = stream_for(seed, name);
    const float amplitude = static_cast<float>(std::sqrt(3.0) * 4.0 / std::sqrt(double(dim)));
    for (uint64_t i = 0; i < n; ++i) {
      const uint16_t h = numerics::f32_to_f16(amplitude * rng.symmetric());
      std::memcpy(out.data() + i * sizeof(uint16_t), &h, sizeof(uint16_t));
    }
  };
}

void add_hyperparameters(models::GgufWriter& w, const SyntheticModelOptions& o, const models::BitNetConfig& c) {
  const std::string p = c.architecture + ".";
  w.add_string("general.architecture", c.architecture);
  w.add_string("general.name", "bitnet-dsl synthetic " + o.preset + " (seed " + std::to_string(o.seed) + ")");
  w.add_u32("general.file_type", o.weight_type == GgmlType::TQ2_0   ? kFileTypeTQ2
                                  : o.weight_type == GgmlType::TQ1_0 ? kFileTypeTQ1
                                                                           : kFileTypeI2S);
  w.add_u32("general.quantization_version", 2);
  w.add_u32(p + "vocab_size", o.vocab_size);
  w.add_u32(p + "context_length", o.context_length);
  w.add_u32(p + "embedding_length", o.dim);
  w.add_u32(p + "block_count", o.n_layers);
  w.add_u32(p + "feed_forward_length", o.ffn_dim);
  w.add_u32(p + "rope.dimension_count", c.head_dim);
  w.add_u32(p + "attention.head_count", o.n_heads);
  w.add_u32(p + "attention.head_count_kv", o.n_kv_heads);
  w.add_f32(p + "attention.layer_norm_rms_epsilon", o.rms_norm_eps);
  w.add_f32(p + "rope.freq_base", o.rope_freq_base);
  w.add_string("bitnet-dsl.synthetic.preset", o.preset);
  w.add_u64("bitnet-dsl.synthetic.seed", o.seed);
}

// The tokenizer keys as llama.cpp writes them for LLaMA-3 (and, like the BitNet file, no
// tokenizer.ggml.pre: the reader must assume the LLaMA-3 split).
void add_tokenizer(models::GgufWriter& w, uint32_t vocab_size, const std::string& model) {
  if (model != "gpt2" && model != "llama")
    throw std::invalid_argument("--tokenizer expects gpt2 or llama, got '" + model + "'");
  const models::TokenizerSpec vocab =
      model == "llama" ? make_synthetic_sentencepiece_vocab(vocab_size) : make_synthetic_vocab(vocab_size);
  w.add_string("tokenizer.ggml.model", model);
  w.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.add_array<int32_t>("tokenizer.ggml.token_type", vocab.token_types);
  if (model == "gpt2") w.add_string_array("tokenizer.ggml.merges", vocab.merges);
  if (model == "llama") w.add_array<float>("tokenizer.ggml.scores", vocab.scores);
  w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(vocab.bos_id));
  w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(vocab.eos_id));
}

void add_tensor(models::GgufWriter& w, const models::BitNetTensorSpec& spec, const SyntheticModelOptions& o) {
  const uint64_t n = models::ggml_element_count(spec.dims);
  const uint64_t seed = o.seed;
  switch (spec.type) {
    case GgmlType::I2_S: {
      const bool f16 = o.f16_scales || models::tq::is_tq(o.weight_type);
      w.add_tensor(spec.name, o.weight_type, spec.dims,
                   ternary_fill(seed, spec.name, spec.dims[0], n, o.weight_type, f16, o.projection_multiplier));
      break;
    }
    case GgmlType::F32:
      w.add_tensor(spec.name, spec.type, spec.dims, norm_fill(seed, spec.name, n));
      break;
    case GgmlType::F16:
      w.add_tensor(spec.name, spec.type, spec.dims, embedding_fill(seed, spec.name, spec.dims[0], n));
      break;
    default:
      throw std::logic_error("synthetic model: no generator for tensor " + spec.name + " of type " +
                             std::string(models::ggml_type_name(spec.type)));
  }
}

}  // namespace

SyntheticModelOptions synthetic_preset(std::string_view name) {
  SyntheticModelOptions o;
  o.preset = std::string(name);
  if (name == "tiny") return o;  // the defaults
  if (name == "2b") {
    o.dim = 2560, o.n_layers = 30, o.n_heads = 20, o.n_kv_heads = 5, o.ffn_dim = 6912;
    o.vocab_size = 128256, o.context_length = 4096, o.rope_freq_base = 500000.0f;
    return o;
  }
  // The LLaMA-shaped family at the shapes of docs/model-family.md's table (its sources and marks:
  // Llama3-8B is Meta-Llama-3-8B's shape; Falcon3's hidden and FFN sizes are unverified copies).
  // An LM head of their own (output.weight), as Llama 3 8B has.
  auto llama = [&](uint32_t layers, uint32_t dim, uint32_t heads, uint32_t kv_heads, uint32_t ffn, uint32_t vocab,
                   uint32_t context, float rope_base) {
    o.architecture = "llama";
    o.untied_output = true;
    o.dim = dim, o.n_layers = layers, o.n_heads = heads, o.n_kv_heads = kv_heads, o.ffn_dim = ffn;
    o.vocab_size = vocab, o.context_length = context, o.rope_freq_base = rope_base;
    return o;
  };
  if (name == "llama3-8b") return llama(32, 4096, 32, 8, 14336, 128256, 8192, 500000.0f);
  if (name == "falcon3-1b") return llama(18, 2048, 8, 4, 8192, 131072, 8192, 1000042.0f);
  if (name == "falcon3-3b") return llama(22, 3072, 12, 4, 9216, 131072, 32768, 1000042.0f);
  if (name == "falcon3-7b") return llama(28, 3072, 12, 4, 23040, 131072, 32768, 1000042.0f);
  if (name == "falcon3-10b") return llama(40, 3072, 12, 4, 23040, 131072, 32768, 1000042.0f);
  // 1bitLLM's bitnet_b1_58-large: dim and FFN verified in bitnet.cpp; 24 layers, 16 heads (a third-party
  // table says 24), vocab 32002, ctx 2048 and RoPE base 10000 from unverified copies; tied head.
  if (name == "bitnet-large") {
    o.architecture = "bitnet";
    o.dim = 1536, o.n_layers = 24, o.n_heads = 16, o.n_kv_heads = 16, o.ffn_dim = 4096;
    o.vocab_size = 32002, o.context_length = 2048, o.rope_freq_base = 10000.0f;
    return o;
  }
  throw std::invalid_argument("unknown preset '" + std::string(name) +
                              "' (known: tiny, 2b, llama3-8b, falcon3-1b, falcon3-3b, falcon3-7b, falcon3-10b, bitnet-large)");
}

models::BitNetConfig synthetic_config(const SyntheticModelOptions& o) {
  require(o.n_layers >= 1, "--layers must be at least 1");
  require(o.n_heads >= 1 && o.dim % o.n_heads == 0,
          "--heads " + std::to_string(o.n_heads) + " must divide --dim " + std::to_string(o.dim));
  require(o.n_kv_heads >= 1 && o.n_heads % o.n_kv_heads == 0,
          "--kv-heads " + std::to_string(o.n_kv_heads) + " must divide --heads " + std::to_string(o.n_heads));
  require(o.dim > 0 && o.dim % 128 == 0, "--dim " + std::to_string(o.dim) + " must be a positive multiple of 128 (I2_S blocks)");
  require(o.ffn_dim > 0 && o.ffn_dim % 128 == 0,
          "--ffn " + std::to_string(o.ffn_dim) + " must be a positive multiple of 128 (I2_S blocks)");
  require((o.dim / o.n_heads) % 2 == 0, "the head size --dim/--heads must be even (RoPE pairs)");
  require(o.weight_type == GgmlType::I2_S || models::tq::is_tq(o.weight_type),
          "the projections' type must be I2_S, TQ2_0 or TQ1_0, not " + std::string(models::ggml_type_name(o.weight_type)));
  require(!models::tq::is_tq(o.weight_type) || (o.dim % 256 == 0 && o.ffn_dim % 256 == 0),
          "--dim and --ffn must be multiples of 256 for " + std::string(models::ggml_type_name(o.weight_type)) + " (its blocks)");
  require(o.context_length >= 1, "--ctx must be at least 1");
  models::BitNetConfig c;
  const models::ArchitectureTraits* traits = models::architecture_traits(o.architecture);
  require(traits != nullptr, "--arch must be bitnet-b1.58, bitnet-25, bitnet or llama, not '" + o.architecture + "'");
  models::set_architecture(c, *traits);
  c.vocab_size = o.vocab_size;
  c.context_length = o.context_length;
  c.dim = o.dim;
  c.n_layers = o.n_layers;
  c.ffn_dim = o.ffn_dim;
  c.n_heads = o.n_heads;
  c.n_kv_heads = o.n_kv_heads;
  c.head_dim = o.dim / o.n_heads;
  c.rope_dim = c.head_dim;
  c.rms_norm_eps = o.rms_norm_eps;
  c.rope_freq_base = o.rope_freq_base;
  c.tied_output = !o.untied_output;
  return c;
}

models::GgufWriter make_synthetic_model(const SyntheticModelOptions& options) {
  const models::BitNetConfig config = synthetic_config(options);
  models::GgufWriter w;
  add_hyperparameters(w, options, config);
  add_tokenizer(w, options.vocab_size, options.tokenizer);
  for (const auto& spec : models::bitnet_tensor_specs(config)) {
    if (spec.required) add_tensor(w, spec, options);
    if (spec.type == GgmlType::I2_S && options.projection_multiplier != 1.0f)
      w.add_tensor(models::projection_scale_name(spec.name), GgmlType::F32, {1},
                   [k = options.projection_multiplier](std::span<std::byte> out) { std::memcpy(out.data(), &k, sizeof k); });
  }
  return w;
}

void write_synthetic_model(const SyntheticModelOptions& options, const std::filesystem::path& path) {
  make_synthetic_model(options).write(path);
}

}  // namespace bdsl::golden
