// Perplexity on the tiny model (models/perplexity.h): every token's logits from the batched
// prompt path are prefill()'s for the tokens up to it, the perplexity is exp of the mean NLL of
// llama-perplexity's scored positions computed from those, and a base file compared with its
// own model gives no divergence while another model's does.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "device_test.h"
#include "temp_dir.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/bitnet_model.h"
#include "models/kl_base_file.h"
#include "models/numerics/logit_stats.h"
#include "models/perplexity.h"

namespace bdsl::test {
namespace {
namespace fs = std::filesystem;

class Perplexity : public DeviceTest {
 protected:
  static void SetUpTestSuite() {
    dir_.emplace("perplexity");
    golden::write_synthetic_model(golden::synthetic_preset("tiny"), *dir_ / "tiny.gguf");
    auto other = golden::synthetic_preset("tiny");
    other.seed += 1;
    golden::write_synthetic_model(other, *dir_ / "other.gguf");
  }
  static void TearDownTestSuite() { dir_.reset(); }
  inline static std::optional<TempDir> dir_;
};

std::vector<int32_t> text_tokens(size_t n, uint32_t vocab) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = int32_t((i * 7919 + (i * i) % 13 + 5) % vocab);
  return t;
}

// Each row is what prefill() of the tokens up to it gives through the decode graph's tail (the
// same head, bit for bit); against step() by step() the prompt path drifts as it does for
// prefill() (Prefill.MatchesDecodeAtEveryPosition).
TEST_F(Perplexity, EveryTokensLogitsAreThePromptPathsAndCloseToTheDecodeGraphs) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::BitNetModel batch(ctx(), file, config), decode(ctx(), file, config);
  const auto tokens = text_tokens(45, config.vocab_size);  // two groups of logit rows, the second partial
  std::vector<std::vector<float>> rows;
  batch.prefill_all_logits(tokens, 0, [&](uint32_t i, std::span<const float> logits) {
    EXPECT_EQ(i, rows.size()) << "rows in order";
    rows.emplace_back(logits.begin(), logits.end());
  });
  ASSERT_EQ(rows.size(), tokens.size());
  EXPECT_EQ(rows.back(), batch.logits()) << "the last row is the tail's logits";
  for (uint32_t k : {1u, 9u, 32u, 33u}) {
    batch.prefill(std::span(tokens).first(k), 0);
    EXPECT_EQ(rows[k - 1], batch.logits()) << "prefill of " << k;
  }
  for (uint32_t i = 0; i < tokens.size(); ++i) {
    decode.step(tokens[i], i);
    EXPECT_LT(numerics::kl_divergence(decode.logits(), rows[i]), 0.05) << "token " << i;
  }
}

TEST_F(Perplexity, IsTheMeanLikelihoodOfTheScoredPositions) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::BitNetModel model(ctx(), file, config), reference(ctx(), file, config);
  const uint32_t context = 16, bos = 3;
  const auto tokens = text_tokens(3 * context + 7, config.vocab_size);  // 3 windows; 7 tokens left over
  models::PerplexityOptions o;
  o.context = context;
  o.bos = bos;
  uint32_t progress_calls = 0;
  o.progress = [&](uint32_t done, uint32_t total) {
    EXPECT_EQ(++progress_calls, done);
    EXPECT_EQ(total, 3u);
  };
  const auto r = models::evaluate_perplexity(model, tokens, o);
  EXPECT_EQ(r.windows, 3u);
  EXPECT_EQ(r.scored, 3 * models::scored_per_window(context));
  EXPECT_EQ(models::scored_per_window(context), 7u);  // positions 8..14 predict 9..15
  double nll = 0;
  for (uint32_t w = 0; w < 3; ++w) {
    std::vector<int32_t> window(tokens.begin() + w * context, tokens.begin() + (w + 1) * context);
    window[0] = bos;
    for (uint32_t i = context / 2; i + 1 < context; ++i) {  // position i's logits: the prompt up to it
      reference.prefill(std::span(window).first(i + 1), 0);
      nll += numerics::negative_log_likelihood(reference.logits(), uint32_t(window[i + 1]));
    }
  }
  const double want = std::exp(nll / r.scored);
  EXPECT_NEAR(r.ppl, want, 1e-9 * want);
  EXPECT_GT(r.ppl_error, 0);
  EXPECT_EQ(r.running_ppl.size(), 3u);
  EXPECT_DOUBLE_EQ(r.running_ppl.back(), r.ppl);
  o.context = config.context_length + 1;
  EXPECT_THROW(models::evaluate_perplexity(model, tokens, o), std::invalid_argument);
  o.context = uint32_t(tokens.size()) + 1;
  EXPECT_THROW(models::evaluate_perplexity(model, tokens, o), std::invalid_argument);
}

TEST_F(Perplexity, KlDivergenceAgainstABaseFile) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf"), other_file = models::GgufFile::open(*dir_ / "other.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::BitNetModel model(ctx(), file, config), other(ctx(), other_file, config);
  const uint32_t context = 16;
  const auto tokens = text_tokens(2 * context, config.vocab_size);
  const std::string path = (*dir_ / "base.kld").string();
  models::PerplexityOptions o;
  o.context = context;
  o.bos = 1;
  {
    models::KlBaseWriter writer(path, {config.vocab_size, context, 2, models::scored_per_window(context)},
                                models::perplexity_tokens(tokens, context, o.bos));
    o.save = &writer;
    models::evaluate_perplexity(model, tokens, o);
    writer.close();
    o.save = nullptr;
  }
  {
    models::KlBaseReader base(path);
    o.compare = &base;
    const auto r = models::evaluate_perplexity(model, tokens, o);
    ASSERT_EQ(r.kl.size(), r.scored);
    const auto s = models::summarize_kl(r);
    EXPECT_LT(s.max, 1e-5) << "the same model: only the F16 storage of the base differs";
    EXPECT_EQ(s.top1, 1.0);
  }
  {
    models::KlBaseReader base(path);
    o.compare = &base;
    const auto s = models::summarize_kl(models::evaluate_perplexity(other, tokens, o));
    EXPECT_GT(s.mean, 1e-2) << "another model";
    EXPECT_LT(s.top1, 1.0);
    EXPECT_LE(s.min, s.median);
    EXPECT_LE(s.median, s.max);
  }
  {  // the base's context and text must be this run's
    models::KlBaseReader base(path);
    o.compare = &base;
    auto shifted = tokens;
    shifted[20] = (shifted[20] + 1) % int32_t(config.vocab_size);
    try {
      models::evaluate_perplexity(model, shifted, o);
      ADD_FAILURE() << "another text";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("differ from this text's at token 20"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace bdsl::test
