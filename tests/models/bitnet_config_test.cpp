// BitNet config: read from metadata, and one test per validation rule, each checking that the
// error names the key or tensor with expected vs found.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>

#include "models/bitnet_config.h"
#include "models/formats/gguf_writer.h"
#include "models/formats/i2s.h"

namespace bdsl::models {
namespace {

struct TinyModel {
  std::string arch = "bitnet-b1.58";
  uint32_t dim = 256, ffn = 384, layers = 2, heads = 4, kv_heads = 2, vocab = 16;
  uint32_t rope_dim = 64;
  float eps = 1e-5f;
  bool write_vocab_key = true;
  std::optional<uint32_t> block_count_key;  // written instead of `layers` when set
  // Applied to each tensor spec before writing (rename, retype, reshape, drop by clearing name).
  std::function<void(BitNetTensorSpec&)> tweak_tensor = [](BitNetTensorSpec&) {};
  std::function<void(GgufWriter&)> extra = [](GgufWriter&) {};
};

std::vector<std::byte> write(const TinyModel& m) {
  GgufWriter w;
  const std::string p = m.arch + ".";
  w.add_string("general.architecture", m.arch);
  if (m.write_vocab_key) w.add_u32(p + "vocab_size", m.vocab);
  w.add_u32(p + "context_length", 128);
  w.add_u32(p + "embedding_length", m.dim);
  w.add_u32(p + "block_count", m.block_count_key.value_or(m.layers));
  w.add_u32(p + "feed_forward_length", m.ffn);
  w.add_u32(p + "rope.dimension_count", m.rope_dim);
  w.add_u32(p + "attention.head_count", m.heads);
  w.add_u32(p + "attention.head_count_kv", m.kv_heads);
  w.add_f32(p + "attention.layer_norm_rms_epsilon", m.eps);
  w.add_f32(p + "rope.freq_base", 500000.0f);
  std::vector<std::string> tokens(m.vocab, "t");
  for (uint32_t i = 0; i < m.vocab; ++i) tokens[i] += std::to_string(i);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  m.extra(w);
  BitNetConfig c;
  c.dim = m.dim, c.ffn_dim = m.ffn, c.n_layers = m.layers, c.vocab_size = m.vocab;
  c.head_dim = m.heads ? m.dim / m.heads : 0, c.n_heads = m.heads, c.n_kv_heads = m.kv_heads;
  if (const ArchitectureTraits* a = architecture_traits(m.arch)) c.sub_norms = a->sub_norms;
  for (BitNetTensorSpec spec : bitnet_tensor_specs(c)) {
    m.tweak_tensor(spec);
    if (spec.name.empty()) continue;
    // I2_S zeros are all code 0 (-1): valid; the writer fills everything else with zeros too.
    w.add_tensor(spec.name, spec.type, spec.dims, [](std::span<std::byte> out) {
      std::fill(out.begin(), out.end(), std::byte{0});
    });
  }
  return w.to_bytes();
}

// The violations reported for a model, or {} when it is valid.
std::vector<std::string> violations(const TinyModel& m) {
  const auto bytes = write(m);
  try {
    BitNetConfig::from_gguf(GgufFile::parse(bytes, "tiny.gguf"));
  } catch (const BitNetConfigError& e) {
    return e.violations();
  }
  return {};
}

void expect_one_violation(const TinyModel& m, std::string_view text) {
  const auto v = violations(m);
  ASSERT_EQ(v.size(), 1u) << (v.empty() ? "no violation" : v.front());
  EXPECT_NE(v[0].find(text), std::string::npos) << "message: " << v[0] << "\nwanted: " << text;
}

TEST(BitNetConfig, ReadsEveryHyperParameterFromTheFile) {
  const auto bytes = write(TinyModel{});
  const BitNetConfig c = BitNetConfig::from_gguf(GgufFile::parse(bytes));
  EXPECT_EQ(c.architecture, "bitnet-b1.58");
  EXPECT_EQ(c.vocab_size, 16u);
  EXPECT_EQ(c.context_length, 128u);
  EXPECT_EQ(c.dim, 256u);
  EXPECT_EQ(c.n_layers, 2u);
  EXPECT_EQ(c.ffn_dim, 384u);
  EXPECT_EQ(c.n_heads, 4u);
  EXPECT_EQ(c.n_kv_heads, 2u);
  EXPECT_EQ(c.head_dim, 64u);
  EXPECT_EQ(c.rope_dim, 64u);
  EXPECT_EQ(c.kv_dim(), 128u);
  EXPECT_EQ(c.gqa_group(), 2u);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_freq_base, 500000.0f);
  EXPECT_TRUE(c.tied_output);
}

TEST(BitNetConfig, AcceptsTheOlderAndMainlineArchitectureNames) {
  for (const char* arch : {"bitnet-25", "bitnet"}) {
    TinyModel m;
    m.arch = arch;
    EXPECT_TRUE(violations(m).empty()) << arch;
  }
}

TEST(BitNetConfig, VocabSizeComesFromTheTokensWhenTheKeyIsAbsent) {
  TinyModel m;
  m.write_vocab_key = false;
  const auto bytes = write(m);
  EXPECT_EQ(BitNetConfig::from_gguf(GgufFile::parse(bytes)).vocab_size, 16u);
}

TEST(BitNetConfig, UntiedOutputIsAccepted) {
  TinyModel m;
  m.extra = [](GgufWriter& w) {
    w.add_tensor("output.weight", GgmlType::F16, {256, 16}, [](std::span<std::byte>) {});
  };
  const auto bytes = write(m);
  EXPECT_FALSE(BitNetConfig::from_gguf(GgufFile::parse(bytes)).tied_output);
}

TEST(BitNetConfigErrors, UnknownArchitecture) {
  TinyModel m;
  m.arch = "gpt2";
  expect_one_violation(m, "key \"general.architecture\": expected \"bitnet-b1.58\", \"bitnet-25\", "
                          "\"bitnet\" or \"llama\", found \"gpt2\"");
}

// Each architecture's graph, from the table (docs/model-family.md) and {arch}.hidden_activation.
TEST(BitNetConfig, EachArchitectureSaysItsGraph) {
  struct Want {
    const char* arch;
    const char* activation_key;  // {arch}.hidden_activation, or none
    bool sub_norms;
    FfnActivation activation;
    RopeMode rope;
  };
  for (const Want& w : {Want{"bitnet-b1.58", nullptr, true, FfnActivation::Relu2, RopeMode::Neox},
                        Want{"bitnet-25", nullptr, true, FfnActivation::Relu2, RopeMode::Neox},
                        Want{"bitnet", nullptr, true, FfnActivation::Silu, RopeMode::Neox},
                        Want{"bitnet", "relu2", true, FfnActivation::Relu2, RopeMode::Neox},
                        Want{"llama", nullptr, false, FfnActivation::Silu, RopeMode::Adjacent},
                        Want{"bitnet-b1.58", "silu", true, FfnActivation::Silu, RopeMode::Neox}}) {
    TinyModel m;
    m.arch = w.arch;
    if (w.activation_key)
      m.extra = [&](GgufWriter& g) { g.add_string(std::string(w.arch) + ".hidden_activation", w.activation_key); };
    const auto bytes = write(m);
    const BitNetConfig c = BitNetConfig::from_gguf(GgufFile::parse(bytes));  // llama: no sub-norm tensors to find
    EXPECT_EQ(c.sub_norms, w.sub_norms) << w.arch;
    EXPECT_EQ(c.ffn_activation, w.activation) << w.arch << " " << (w.activation_key ? w.activation_key : "");
    EXPECT_EQ(c.rope_mode, w.rope) << w.arch;
    const auto specs = bitnet_tensor_specs(c);
    const bool has_sub_norm = std::any_of(specs.begin(), specs.end(), [](const auto& s) { return s.name == "blk.0.ffn_sub_norm.weight"; });
    EXPECT_EQ(has_sub_norm, w.sub_norms) << w.arch;
  }
  TinyModel gelu;
  gelu.extra = [](GgufWriter& g) { g.add_string("bitnet-b1.58.hidden_activation", "gelu"); };
  expect_one_violation(gelu, "key \"bitnet-b1.58.hidden_activation\": expected \"relu2\" or \"silu\", found \"gelu\"");
}

TEST(BitNetConfigErrors, MissingKey) {
  const auto bytes = [] {
    GgufWriter w;
    w.add_string("general.architecture", "bitnet");
    return w.to_bytes();
  }();
  try {
    BitNetConfig::from_metadata(GgufFile::parse(bytes, "tiny.gguf"));
    FAIL();
  } catch (const BitNetConfigError& e) {
    EXPECT_EQ(e.violations().front(), "missing key \"bitnet.vocab_size\" and no "
                                      "\"tokenizer.ggml.tokens\" to count");
    EXPECT_EQ(e.violations()[1], "missing key \"bitnet.context_length\"");
    EXPECT_NE(std::string(e.what()).find("tiny.gguf: not a valid BitNet model"), std::string::npos);
  }
}

TEST(BitNetConfigErrors, KeyOfWrongType) {
  TinyModel m;
  m.arch = "bitnet-25";
  m.write_vocab_key = false;
  m.extra = [](GgufWriter& w) { w.add_string("bitnet-25.vocab_size", "many"); };
  expect_one_violation(m, "metadata key \"bitnet-25.vocab_size\": expected an unsigned integer, found string");
}

TEST(BitNetConfigErrors, HeadDimTimesHeadsMustBeDim) {
  TinyModel m;
  m.heads = 3, m.kv_heads = 1;
  expect_one_violation(m, "expected head_dim * head_count == embedding_length, but 256 is not a multiple of 3");
}

TEST(BitNetConfigErrors, KvHeadsMustDivideHeads) {
  TinyModel m;
  m.kv_heads = 3;
  expect_one_violation(m, "key \"bitnet-b1.58.attention.head_count_kv\": expected a divisor of "
                          "head_count 4, found 3");
}

TEST(BitNetConfigErrors, DimMustBeAMultipleOf128) {
  TinyModel m;
  m.dim = 320, m.heads = 5, m.kv_heads = 5;
  expect_one_violation(m, "key \"bitnet-b1.58.embedding_length\": expected a multiple of 128 (I2_S blocks), found 320");
}

TEST(BitNetConfigErrors, FfnMustBeAMultipleOf128) {
  TinyModel m;
  m.ffn = 320;
  expect_one_violation(m, "key \"bitnet-b1.58.feed_forward_length\": expected a multiple of 128 "
                          "(I2_S blocks), found 320");
}

TEST(BitNetConfigErrors, RopeDimensionMustBeHeadDim) {
  TinyModel m;
  m.rope_dim = 32;
  expect_one_violation(m, "key \"bitnet-b1.58.rope.dimension_count\": expected head_dim 64 "
                          "(partial RoPE is not supported), found 32");
}

TEST(BitNetConfigErrors, EpsilonMustBePositive) {
  TinyModel m;
  m.eps = 0.0f;
  expect_one_violation(m, "key \"bitnet-b1.58.attention.layer_norm_rms_epsilon\": expected a small positive number, found 0");
}

TEST(BitNetConfigErrors, ZeroLayers) {
  TinyModel m;
  m.layers = 0;
  expect_one_violation(m, "key \"bitnet-b1.58.block_count\": expected a value in 1..2^32-1, found 0");
}

TEST(BitNetConfigErrors, BlockCountBeyondTheTensorsIsOneErrorNotMillionsOfThem) {
  TinyModel m;  // found by the fuzzer: listing 2M layers' missing tensors ran out of memory
  m.block_count_key = 2'097'153;
  expect_one_violation(m, "key \"bitnet-b1.58.block_count\": 2097153 layers need at least "
                          "23068685 tensors, but the file holds 24");
}

TEST(BitNetConfigErrors, MissingTensor) {
  TinyModel m;
  m.tweak_tensor = [](BitNetTensorSpec& s) { if (s.name == "blk.1.ffn_up.weight") s.name.clear(); };
  expect_one_violation(m, "missing tensor \"blk.1.ffn_up.weight\" (expected I2_S [256, 384])");
}

TEST(BitNetConfigErrors, TensorOfWrongType) {
  TinyModel m;
  m.tweak_tensor = [](BitNetTensorSpec& s) { if (s.name == "blk.0.attn_q.weight") s.type = GgmlType::F16; };
  expect_one_violation(m, "tensor \"blk.0.attn_q.weight\": expected type I2_S (or TQ2_0, TQ1_0), found F16");
}

TEST(BitNetConfigErrors, NormOfWrongType) {
  TinyModel m;
  m.tweak_tensor = [](BitNetTensorSpec& s) { if (s.name == "output_norm.weight") s.type = GgmlType::F16; };
  expect_one_violation(m, "tensor \"output_norm.weight\": expected type F32, found F16");
}

// Mainline llama.cpp's per-projection multipliers (`blk.N.<projection>.scale`, one F32) are read
// (models::projection_multiplier); one of another tensor, of another shape or not finite is refused.
TEST(BitNetConfigErrors, ScaleTensorsOfProjectionsAreReadAndOthersRefused) {
  auto one = [](float v) {
    return [v](std::span<std::byte> out) { std::memcpy(out.data(), &v, sizeof v); };
  };
  TinyModel m;
  m.extra = [&](GgufWriter& w) { w.add_tensor("blk.0.ffn_up.scale", GgmlType::F32, {1}, one(2.5f)); };
  EXPECT_TRUE(violations(m).empty());
  const auto bytes = write(m);
  const auto file = GgufFile::parse(bytes);
  EXPECT_EQ(projection_multiplier(file, "blk.0.ffn_up.weight"), 2.5f);
  EXPECT_EQ(projection_multiplier(file, "blk.0.ffn_down.weight"), 1.0f);
  TinyModel norm;
  norm.extra = [&](GgufWriter& w) { w.add_tensor("blk.0.attn_norm.scale", GgmlType::F32, {1}, one(2)); };
  expect_one_violation(norm, "tensor \"blk.0.attn_norm.scale\": a scale tensor of no projection of this model");
  TinyModel wide;
  wide.extra = [&](GgufWriter& w) { w.add_tensor("blk.1.attn_q.scale", GgmlType::F32, {2}, one(2)); };
  expect_one_violation(wide, "tensor \"blk.1.attn_q.scale\": expected type F32 shape [1], found F32 [2]");
  TinyModel nan;
  nan.extra = [&](GgufWriter& w) { w.add_tensor("blk.1.attn_q.scale", GgmlType::F32, {1}, one(std::nanf(""))); };
  expect_one_violation(nan, "tensor \"blk.1.attn_q.scale\": the multiplier is not a finite number");
}

TEST(BitNetConfigErrors, WhatTheGraphsDoNotApplyIsRefusedNotIgnored) {
  TinyModel bias;
  bias.arch = "llama";
  bias.extra = [](GgufWriter& w) { w.add_tensor("blk.1.attn_q.bias", GgmlType::F32, {256}, [](std::span<std::byte>) {}); };
  expect_one_violation(bias, "tensor \"blk.1.attn_q.bias\": bias tensors are not supported");
  TinyModel factors;
  factors.arch = "llama";
  factors.extra = [](GgufWriter& w) { w.add_tensor("rope_freqs.weight", GgmlType::F32, {32}, [](std::span<std::byte>) {}); };
  expect_one_violation(factors, "tensor \"rope_freqs.weight\": RoPE frequency factors (Llama 3.1's scaling) are not supported");
  TinyModel scaled;
  scaled.extra = [](GgufWriter& w) { w.add_string("bitnet-b1.58.rope.scaling.type", "yarn"); };
  expect_one_violation(scaled, "key \"bitnet-b1.58.rope.scaling.type\": RoPE scaling \"yarn\" is not supported (only none)");
  TinyModel unscaled;
  unscaled.extra = [](GgufWriter& w) { w.add_string("bitnet-b1.58.rope.scaling.type", "none"); };
  EXPECT_TRUE(violations(unscaled).empty());
}

TEST(BitNetConfigErrors, TensorOfWrongShape) {
  TinyModel m;  // GGUF lists dims innermost first: a transposed projection is caught
  m.tweak_tensor = [](BitNetTensorSpec& s) { if (s.name == "blk.0.ffn_down.weight") std::swap(s.dims[0], s.dims[1]); };
  expect_one_violation(m, "tensor \"blk.0.ffn_down.weight\": expected shape [384, 256], found [256, 384]");
}

TEST(BitNetConfigErrors, EmbeddingOfWrongShape) {
  TinyModel m;
  m.tweak_tensor = [](BitNetTensorSpec& s) { if (s.name == "token_embd.weight") s.dims = {256, 17}; };
  expect_one_violation(m, "tensor \"token_embd.weight\": expected shape [256, 16], found [256, 17]");
}

TEST(BitNetConfigErrors, CodeThreeInAProjection) {
  auto bytes = write(TinyModel{});
  const GgufFile clean = GgufFile::parse(bytes);
  const uint64_t at = clean.tensor("blk.1.attn_k.weight").file_offset + 10;
  bytes[at] = std::byte{0xC0};
  try {
    validate_bitnet_i2s_codes(GgufFile::parse(bytes, "tiny.gguf"));
    FAIL();
  } catch (const BitNetConfigError& e) {
    ASSERT_EQ(e.violations().size(), 1u);
    EXPECT_NE(e.violations()[0].find("tensor \"blk.1.attn_k.weight\": invalid I2_S code 3 at byte 10"),
              std::string::npos) << e.violations()[0];
  }
}

TEST(BitNetTensorSpecs, ListTheRealNamesInGgufDimOrder) {
  BitNetConfig c;
  c.dim = 2560, c.ffn_dim = 6912, c.n_layers = 30, c.vocab_size = 128256;
  c.n_heads = 20, c.n_kv_heads = 5, c.head_dim = 128;
  const auto specs = bitnet_tensor_specs(c);
  ASSERT_EQ(specs.size(), 332u);  // as in the real file (docs/format.md): tied head, 2 + 30 * 11
  EXPECT_EQ(specs[0].name, "token_embd.weight");
  EXPECT_EQ(specs[0].dims, (std::vector<uint64_t>{2560, 128256}));
  EXPECT_EQ(specs[4].name, "blk.0.attn_k.weight");
  EXPECT_EQ(specs[4].dims, (std::vector<uint64_t>{2560, 640}));
  EXPECT_EQ(specs.back().name, "blk.29.ffn_sub_norm.weight");
}

}  // namespace
}  // namespace bdsl::models
