#include "models/bitnet_config.h"

#include <cmath>
#include <cstring>
#include <unordered_set>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "models/formats/i2s.h"
#include "models/formats/tq.h"

namespace bdsl::models {

namespace {

constexpr uint64_t kI2sBlock = i2s::kBlockElements;  // dims feeding I2_S rows must be multiples
constexpr uint64_t kTensorsPerLayer = 11;  // attn_norm ... ffn_sub_norm (9 without the sub-norms)

std::string join_lines(std::string_view file, const std::vector<std::string>& violations) {
  std::string out = fmt::format("{}: not a valid BitNet model ({} problem{}):", file,
                                violations.size(), violations.size() == 1 ? "" : "s");
  for (const auto& v : violations) out += "\n  " + v;
  return out;
}

// Reads the architecture's keys, recording each problem instead of stopping at the first.
class MetadataReader {
 public:
  MetadataReader(const GgufFile& file, std::string prefix) : f_(file), prefix_(std::move(prefix)) {}

  // A positive integer key under the architecture prefix; `fallback` when absent (nullopt:
  // required). One problem at most per key, so a bad key does not cascade into others.
  uint32_t u32(std::string_view suffix, std::optional<uint32_t> fallback = std::nullopt) {
    const std::string key = prefix_ + std::string(suffix);
    try {
      const auto v = f_.find_uint(key);
      if (!v) {
        if (!fallback) problems.push_back(fmt::format("missing key \"{}\"", key));
        return fallback.value_or(0);
      }
      if (*v == 0 || *v > std::numeric_limits<uint32_t>::max()) {
        problems.push_back(fmt::format("key \"{}\": expected a value in 1..2^32-1, found {}", key, *v));
        return 0;
      }
      return static_cast<uint32_t>(*v);
    } catch (const GgufError& e) {
      problems.push_back(e.what());
      return 0;
    }
  }

  float f32(std::string_view suffix, std::optional<float> fallback = std::nullopt) {
    const std::string key = prefix_ + std::string(suffix);
    try {
      const auto v = f_.find_float(key);
      if (!v && !fallback) problems.push_back(fmt::format("missing key \"{}\"", key));
      return v ? static_cast<float>(*v) : fallback.value_or(0.0f);
    } catch (const GgufError& e) {
      problems.push_back(e.what());
      return 0.0f;
    }
  }

  // {arch}.vocab_size, else the number of tokens in the tokenizer (the real file has no key).
  uint32_t vocab_size() {
    if (f_.contains(prefix_ + "vocab_size")) return u32("vocab_size");
    try {
      if (const GgufArray* tokens = f_.find_array("tokenizer.ggml.tokens"))
        return static_cast<uint32_t>(std::min<uint64_t>(tokens->size(), UINT32_MAX));
    } catch (const GgufError& e) {
      problems.push_back(e.what());
      return 0;
    }
    problems.push_back(fmt::format("missing key \"{}vocab_size\" and no \"tokenizer.ggml.tokens\" "
                                   "to count", prefix_));
    return 0;
  }

  std::vector<std::string> problems;

 private:
  const GgufFile& f_;
  std::string prefix_;
};

std::string architecture_of(const GgufFile& file) {
  std::string_view arch;
  try {
    arch = file.get_string("general.architecture");
  } catch (const GgufError& e) {
    throw BitNetConfigError(file.name(), {e.what()});
  }
  if (!is_bitnet_architecture(arch))
    throw BitNetConfigError(file.name(), {fmt::format("key \"general.architecture\": expected "
        "\"bitnet-b1.58\", \"bitnet-25\", \"bitnet\" or \"llama\", found \"{}\"", arch)});
  return std::string(arch);
}

// The shape rules from docs/format.md / the issue: each names the keys it relates.
void check_shapes(const BitNetConfig& c, const std::string& p, std::vector<std::string>& problems) {
  const bool whole_heads = c.dim % c.n_heads == 0;
  if (!whole_heads)
    problems.push_back(fmt::format("keys \"{0}embedding_length\" ({1}) and \"{0}attention.head_count\" "
        "({2}): expected head_dim * head_count == embedding_length, but {1} is not a multiple of {2}",
        p, c.dim, c.n_heads));
  if (c.n_heads % c.n_kv_heads != 0)
    problems.push_back(fmt::format("key \"{}attention.head_count_kv\": expected a divisor of "
        "head_count {}, found {}", p, c.n_heads, c.n_kv_heads));
  if (c.dim % kI2sBlock != 0)
    problems.push_back(fmt::format("key \"{}embedding_length\": expected a multiple of {} (I2_S "
        "blocks), found {}", p, kI2sBlock, c.dim));
  if (c.ffn_dim % kI2sBlock != 0)
    problems.push_back(fmt::format("key \"{}feed_forward_length\": expected a multiple of {} "
        "(I2_S blocks), found {}", p, kI2sBlock, c.ffn_dim));
  if (whole_heads && c.head_dim % 2 != 0)
    problems.push_back(fmt::format("head_dim (embedding_length / head_count): expected an even "
        "number (RoPE rotates pairs), found {}", c.head_dim));
  if (whole_heads && c.rope_dim != c.head_dim)
    problems.push_back(fmt::format("key \"{}rope.dimension_count\": expected head_dim {} (partial "
        "RoPE is not supported), found {}", p, c.head_dim, c.rope_dim));
  if (!(c.rms_norm_eps > 0.0f) || !std::isfinite(c.rms_norm_eps))
    problems.push_back(fmt::format("key \"{}attention.layer_norm_rms_epsilon\": expected a small "
        "positive number, found {}", p, c.rms_norm_eps));
  if (!(c.rope_freq_base > 0.0f) || !std::isfinite(c.rope_freq_base))
    problems.push_back(fmt::format("key \"{}rope.freq_base\": expected a positive number, found {}",
                                   p, c.rope_freq_base));
}

std::string shape_text(std::span<const uint64_t> dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

}  // namespace

namespace {

// The family's graphs (docs/model-family.md's table and its "What this means" section).
constexpr ArchitectureTraits kArchitectures[] = {
    {"bitnet-b1.58", true, FfnActivation::Relu2, RopeMode::Neox},  // BitNet b1.58 2B-4T
    {"bitnet-25", true, FfnActivation::Relu2, RopeMode::Neox},     // its older name
    // 1bitLLM's bitnet_b1_58 (SiLU); mainline's conversion of 2B-4T says relu2 in hidden_activation.
    {"bitnet", true, FfnActivation::Silu, RopeMode::Neox},
    // LLaMA-shaped: no sub-norms, SiLU, NORM RoPE on the converter's permuted Q/K.
    {"llama", false, FfnActivation::Silu, RopeMode::Adjacent},
};

}  // namespace

const ArchitectureTraits* architecture_traits(std::string_view architecture) {
  for (const ArchitectureTraits& a : kArchitectures)
    if (a.name == architecture) return &a;
  return nullptr;
}

bool is_bitnet_architecture(std::string_view a) { return architecture_traits(a) != nullptr; }

void set_architecture(BitNetConfig& c, const ArchitectureTraits& traits) {
  c.architecture = std::string(traits.name);
  c.sub_norms = traits.sub_norms;
  c.ffn_activation = traits.ffn_activation;
  c.rope_mode = traits.rope_mode;
}

const char* to_string(FfnActivation activation) {
  return activation == FfnActivation::Relu2 ? "relu(gate)^2 * up" : "silu(gate) * up";
}
const char* to_string(RopeMode mode) { return mode == RopeMode::Neox ? "NeoX RoPE" : "adjacent-pair RoPE"; }

BitNetConfigError::BitNetConfigError(std::string_view file, std::vector<std::string> violations)
    : std::runtime_error(join_lines(file, violations)), violations_(std::move(violations)) {}

BitNetConfig BitNetConfig::from_metadata(const GgufFile& file) {
  BitNetConfig c;
  set_architecture(c, *architecture_traits(architecture_of(file)));
  const std::string p = c.architecture + ".";
  MetadataReader r(file, p);
  c.vocab_size = r.vocab_size();
  c.context_length = r.u32("context_length");
  c.dim = r.u32("embedding_length");
  c.n_layers = r.u32("block_count");
  c.ffn_dim = r.u32("feed_forward_length");
  c.n_heads = r.u32("attention.head_count");
  c.n_kv_heads = r.u32("attention.head_count_kv", c.n_heads);  // llama.cpp: absent means MHA
  c.head_dim = c.n_heads ? c.dim / c.n_heads : 0;
  c.rope_dim = r.u32("rope.dimension_count", c.head_dim);
  c.rms_norm_eps = r.f32("attention.layer_norm_rms_epsilon");
  c.rope_freq_base = r.f32("rope.freq_base", 10000.0f);
  c.tied_output = file.find_tensor("output.weight") == nullptr;
  auto problems = std::move(r.problems);
  const std::string scaling_key = p + "rope.scaling.type";
  try {
    if (const auto scaling = file.find_string(scaling_key); scaling && *scaling != "none")
      problems.push_back(fmt::format("key \"{}\": RoPE scaling \"{}\" is not supported (only none)", scaling_key, *scaling));
  } catch (const GgufError& e) {
    problems.push_back(e.what());
  }
  const std::string activation_key = p + "hidden_activation";
  try {
    if (const auto a = file.find_string(activation_key)) {
      if (*a == "relu2") c.ffn_activation = FfnActivation::Relu2;
      else if (*a == "silu") c.ffn_activation = FfnActivation::Silu;
      else problems.push_back(fmt::format("key \"{}\": expected \"relu2\" or \"silu\", found \"{}\"", activation_key, *a));
    }
  } catch (const GgufError& e) {  // not a string
    problems.push_back(e.what());
  }
  if (problems.empty()) check_shapes(c, p, problems);
  if (!problems.empty()) throw BitNetConfigError(file.name(), std::move(problems));
  return c;
}

BitNetConfig BitNetConfig::from_gguf(const GgufFile& file) {
  BitNetConfig c = from_metadata(file);
  validate_bitnet_tensors(c, file);
  validate_bitnet_i2s_codes(file);
  return c;
}

std::vector<BitNetTensorSpec> bitnet_tensor_specs(const BitNetConfig& c) {
  using T = GgmlType;
  const uint64_t dim = c.dim, ffn = c.ffn_dim, kv = c.kv_dim(), vocab = c.vocab_size;
  std::vector<BitNetTensorSpec> specs = {
      {"token_embd.weight", T::F16, {dim, vocab}},
      {"output_norm.weight", T::F32, {dim}},
  };
  if (!c.tied_output) specs.push_back({"output.weight", T::F16, {dim, vocab}});
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const auto name = [l](std::string_view what) { return fmt::format("blk.{}.{}.weight", l, what); };
    const auto projection = [&](std::string_view what, std::vector<uint64_t> dims) {
      specs.push_back({name(what), T::I2_S, std::move(dims)});
    };
    specs.push_back({name("attn_norm"), T::F32, {dim}});
    projection("attn_q", {dim, dim});
    projection("attn_k", {dim, kv});
    projection("attn_v", {dim, kv});
    projection("attn_output", {dim, dim});
    if (c.sub_norms) specs.push_back({name("attn_sub_norm"), T::F32, {dim}});
    specs.push_back({name("ffn_norm"), T::F32, {dim}});
    projection("ffn_gate", {dim, ffn});
    projection("ffn_up", {dim, ffn});
    projection("ffn_down", {ffn, dim});
    if (c.sub_norms) specs.push_back({name("ffn_sub_norm"), T::F32, {ffn}});
  }
  return specs;
}

std::string projection_scale_name(std::string_view weight_name) {
  if (weight_name.ends_with(".weight")) weight_name.remove_suffix(7);
  return std::string(weight_name) + ".scale";
}

namespace {

// The value of a one-element F32 tensor (a projection's multiplier).
float single_f32(const GgufFile& file, const GgufTensorInfo& t) {
  const auto data = file.tensor_data(t);
  if (t.type != GgmlType::F32 || data.size() < sizeof(float))
    throw BitNetConfigError(file.name(), {fmt::format("tensor \"{}\": expected one F32", t.name)});
  float v;
  std::memcpy(&v, data.data(), sizeof v);
  return v;
}

}  // namespace

float projection_multiplier(const GgufFile& file, std::string_view weight_name) {
  const GgufTensorInfo* t = file.find_tensor(projection_scale_name(weight_name));
  return t ? single_f32(file, *t) : 1.0f;
}

void validate_bitnet_tensors(const BitNetConfig& config, const GgufFile& file) {
  // Checked before the specs are built: a hostile block_count (found by the fuzzer) would
  // otherwise allocate billions of specs and "missing tensor" lines. Up to a layer's worth
  // short, the individual missing tensors are the more useful report.
  const uint64_t per_layer = kTensorsPerLayer - (config.sub_norms ? 0 : 2);
  const uint64_t needed = per_layer * uint64_t{config.n_layers} + 2;
  if (needed > file.tensors().size() + per_layer)
    throw BitNetConfigError(file.name(), {fmt::format(
        "key \"{}.block_count\": {} layers need at least {} tensors, but the file holds {}",
        config.architecture, config.n_layers, needed, file.tensors().size())});
  std::vector<std::string> problems;
  const std::vector<BitNetTensorSpec> specs = bitnet_tensor_specs(config);
  for (const BitNetTensorSpec& spec : specs) {
    const GgufTensorInfo* t = file.find_tensor(spec.name);
    if (!t) {
      if (spec.required)
        problems.push_back(fmt::format("missing tensor \"{}\" (expected {} {})", spec.name,
                                       ggml_type_name(spec.type), shape_text(spec.dims)));
      continue;
    }
    // An untied head may be stored in any float type, a projection in mainline llama.cpp's ternary
    // types (repacked at load); everything else is exact.
    const bool float_head = spec.name == "output.weight" &&
                            (t->type == GgmlType::F32 || t->type == GgmlType::BF16);
    const bool tq_projection = spec.type == GgmlType::I2_S && tq::is_tq(t->type);
    if (t->type != spec.type && !float_head && !tq_projection)
      problems.push_back(fmt::format("tensor \"{}\": expected type {}{}, found {}", spec.name, ggml_type_name(spec.type),
                                     spec.type == GgmlType::I2_S ? " (or TQ2_0, TQ1_0)" : "", ggml_type_name(t->type)));
    if (t->dims != spec.dims)
      problems.push_back(fmt::format("tensor \"{}\": expected shape {}, found {}", spec.name,
                                     shape_text(spec.dims), shape_text(t->dims)));
  }
  // What some files of the family may add and the graphs here do not apply: refused by name rather
  // than silently ignored (biases, Llama 3.1's RoPE factors, a scale of no projection).
  // Mainline's per-projection multipliers are read (projection_multiplier): one F32 each.
  std::unordered_set<std::string> scale_names;
  for (const BitNetTensorSpec& spec : specs)
    if (spec.type == GgmlType::I2_S) scale_names.insert(projection_scale_name(spec.name));
  for (const GgufTensorInfo& t : file.tensors()) {
    if (t.name.size() > 6 && t.name.ends_with(".scale")) {
      if (!scale_names.contains(std::string(t.name)))
        problems.push_back(fmt::format("tensor \"{}\": a scale tensor of no projection of this model", t.name));
      else if (t.type != GgmlType::F32 || t.dims != std::vector<uint64_t>{1})
        problems.push_back(fmt::format("tensor \"{}\": expected type F32 shape [1], found {} {}", t.name,
                                       ggml_type_name(t.type), shape_text(t.dims)));
      else if (!std::isfinite(single_f32(file, t)))
        problems.push_back(fmt::format("tensor \"{}\": the multiplier is not a finite number", t.name));
    }
    if (t.name.size() > 5 && t.name.ends_with(".bias"))
      problems.push_back(fmt::format("tensor \"{}\": bias tensors are not supported", t.name));
    if (t.name == "rope_freqs.weight")
      problems.push_back(fmt::format("tensor \"{}\": RoPE frequency factors (Llama 3.1's scaling) are not supported", t.name));
  }
  if (!problems.empty()) throw BitNetConfigError(file.name(), std::move(problems));
}

void validate_bitnet_i2s_codes(const GgufFile& file) {
  std::vector<std::string> problems;
  for (const GgufTensorInfo& t : file.tensors()) {
    try {
      if (t.type == GgmlType::I2_S) i2s::validate(file.tensor_data(t), t.n_elements, t.name);
      if (tq::is_tq(t.type)) tq::check(t.type, file.tensor_data(t), t.n_elements, t.name);
    } catch (const std::runtime_error& e) {  // I2sError, TqError
      problems.push_back(fmt::format("{} (its data starts at file byte {})", e.what(), t.file_offset));
    }
  }
  if (!problems.empty()) throw BitNetConfigError(file.name(), std::move(problems));
}

}  // namespace bdsl::models
