#include <gtest/gtest.h>

#include <cmath>

#include "golden/synthetic_model.h"
#include "golden/synthetic_vocab.h"
#include "models/bitnet_config.h"
#include "models/formats/gguf.h"
#include "models/formats/i2s.h"
#include "tests/golden/tiny_model.h"

namespace bdsl::golden {
namespace {

TEST(SyntheticModel, SameSeedSameBytesOtherSeedOtherWeights) {
  SyntheticModelOptions o = synthetic_preset("tiny");
  o.dim = 256, o.n_layers = 1, o.n_heads = 4, o.n_kv_heads = 1, o.ffn_dim = 384, o.vocab_size = 300;
  const auto a = make_synthetic_model(o).to_bytes();
  const auto b = make_synthetic_model(o).to_bytes();
  EXPECT_TRUE(a == b);
  o.seed = 2;
  const auto c = make_synthetic_model(o).to_bytes();
  EXPECT_EQ(a.size(), c.size());
  EXPECT_FALSE(a == c);
}

TEST(SyntheticModel, TinyPresetPassesTheReaderAndConfigValidation) {
  const auto& tiny = test::tiny_model();
  const models::BitNetConfig c = models::BitNetConfig::from_gguf(tiny.file);
  EXPECT_EQ(c.architecture, "bitnet-b1.58");
  EXPECT_EQ(c.dim, 512u);
  EXPECT_EQ(c.n_layers, 4u);
  EXPECT_EQ(c.n_heads, 8u);
  EXPECT_EQ(c.n_kv_heads, 2u);
  EXPECT_EQ(c.ffn_dim, 1536u);
  EXPECT_EQ(c.vocab_size, 1000u);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(tiny.file.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_FALSE(tiny.file.contains("tokenizer.ggml.pre"));  // like the real file
  EXPECT_EQ(tiny.file.tensor("token_embd.weight").type, models::GgmlType::F16);
  EXPECT_EQ(tiny.file.tensor("blk.0.attn_q.weight").type, models::GgmlType::I2_S);
  EXPECT_EQ(tiny.file.tensor("blk.3.ffn_sub_norm.weight").type, models::GgmlType::F32);
  EXPECT_LT(tiny.bytes.size(), 8u << 20);
}

TEST(SyntheticModel, TernaryWeightsUseAllThreeValuesEvenly) {
  const auto& w = test::tiny_model().weights.layers[0].ffn_up;
  std::size_t counts[3] = {};
  for (int8_t v : w.values) ++counts[v + 1];
  for (std::size_t k = 0; k < 3; ++k) EXPECT_NEAR(double(counts[k]) / double(w.values.size()), 1.0 / 3, 0.01);
  EXPECT_NEAR(w.scale, 1.0 / std::sqrt(2.0 / 3.0 * 512), 1e-6);
}

// The LLaMA-shaped presets at docs/model-family.md's shapes: architecture llama (its graph from the
// traits), an LM head of their own, head size 128 (Llama 3 8B) or 256 (Falcon3).
TEST(SyntheticModel, LlamaShapedPresetsHaveTheTablesShapes) {
  struct Want {
    const char* name;
    uint32_t layers, dim, heads, kv_heads, head_dim, ffn, vocab;
  };
  for (const Want& w : {Want{"llama3-8b", 32, 4096, 32, 8, 128, 14336, 128256}, Want{"falcon3-1b", 18, 2048, 8, 4, 256, 8192, 131072},
                        Want{"falcon3-3b", 22, 3072, 12, 4, 256, 9216, 131072}, Want{"falcon3-7b", 28, 3072, 12, 4, 256, 23040, 131072},
                        Want{"falcon3-10b", 40, 3072, 12, 4, 256, 23040, 131072}}) {
    SCOPED_TRACE(w.name);
    const models::BitNetConfig c = synthetic_config(synthetic_preset(w.name));
    EXPECT_EQ(c.architecture, "llama");
    EXPECT_FALSE(c.sub_norms);
    EXPECT_EQ(c.ffn_activation, models::FfnActivation::Silu);
    EXPECT_EQ(c.rope_mode, models::RopeMode::Adjacent);
    EXPECT_FALSE(c.tied_output);
    EXPECT_EQ(c.n_layers, w.layers);
    EXPECT_EQ(c.dim, w.dim);
    EXPECT_EQ(c.n_heads, w.heads);
    EXPECT_EQ(c.n_kv_heads, w.kv_heads);
    EXPECT_EQ(c.head_dim, w.head_dim);
    EXPECT_EQ(c.ffn_dim, w.ffn);
    EXPECT_EQ(c.vocab_size, w.vocab);
  }
  const models::BitNetConfig large = synthetic_config(synthetic_preset("bitnet-large"));
  EXPECT_EQ(large.architecture, "bitnet");
  EXPECT_TRUE(large.sub_norms);
  EXPECT_EQ(large.ffn_activation, models::FfnActivation::Silu);
  EXPECT_EQ(large.head_dim, 96u);
  EXPECT_TRUE(large.tied_output);
}

TEST(SyntheticModel, BadShapesAreRejectedNamingTheOption) {
  SyntheticModelOptions o = synthetic_preset("tiny");
  o.n_kv_heads = 3;
  EXPECT_THROW(synthetic_config(o), std::invalid_argument);
  o = synthetic_preset("tiny");
  o.dim = 500;
  EXPECT_THROW(synthetic_config(o), std::invalid_argument);
  EXPECT_THROW(synthetic_preset("7b"), std::invalid_argument);
  EXPECT_THROW(make_synthetic_vocab(100), std::invalid_argument);
}

TEST(SyntheticVocab, TokenizesEnglishIntoWords) {
  const auto& tok = test::tiny_model().tokenizer;
  EXPECT_EQ(tok.vocab_size(), 1000);
  EXPECT_EQ(tok.token_text(tok.bos_id()), "<|begin_of_text|>");
  EXPECT_EQ(tok.token_text(tok.eos_id()), "<|end_of_text|>");
  EXPECT_EQ(tok.token_text(tok.eot_id()), "<|eot_id|>");
  const auto ids = tok.encode(" the people", false);
  EXPECT_EQ(ids.size(), 2u);  // both learned from the built-in corpus
  EXPECT_EQ(tok.decode(ids), " the people");
}

// The SentencePiece form (1bitLLM's files): the same ids, the same words whole; "the people" takes
// the space prefix SentencePiece puts in front of a prompt, so it is " the people" in BPE's terms.
TEST(SyntheticVocab, TheSentencePieceFormTokenizesEnglishIntoTheSameWords) {
  const models::Tokenizer bpe(make_synthetic_vocab(1000)), spm(make_synthetic_sentencepiece_vocab(1000));
  EXPECT_EQ(spm.vocab_size(), 1000);
  EXPECT_EQ(spm.bos_id(), bpe.bos_id());
  const auto ids = spm.encode("the people", false);
  EXPECT_EQ(ids, bpe.encode(" the people", false));
  EXPECT_EQ(spm.decode(ids), " the people");
  EXPECT_EQ(spm.token_type(int32_t(bpe.encode("a", false)[0])), models::TokenType::Byte);
}

TEST(SyntheticVocab, LargeVocabularyIsFullAndValid) {
  const auto spec = make_synthetic_vocab(20000);
  EXPECT_EQ(spec.tokens.size(), 20000u);
  EXPECT_EQ(spec.tokens[static_cast<std::size_t>(spec.bos_id)], "<|begin_of_text|>");
  EXPECT_EQ(synthetic_special_count(20000), 256u);
  const models::Tokenizer tok(spec);  // every merge resolves
  EXPECT_EQ(tok.decode(tok.encode("hello world", false)), "hello world");
}

}  // namespace
}  // namespace bdsl::golden
