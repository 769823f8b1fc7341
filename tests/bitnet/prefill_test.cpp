// BitNet's batched prompt path on the device, on the tiny synthetic model and its other
// architectures: prefill against the decode path's logits and KV cache in every layout (one
// dispatch per projection, attention on tensor cores), the graph's steps, and the generator.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "device_test.h"
#include "temp_dir.h"
#include "golden/golden_compare.h"
#include "golden/npy.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/bitnet_model.h"
#include "models/bitnet/golden_check.h"
#include "models/generator.h"
#include "ops/attention.h"
#include "ops/tuning.h"

namespace bdsl::test {
namespace {
namespace fs = std::filesystem;

const fs::path kGolden = fs::path(BDSL_SOURCE_DIR) / "golden/data/tiny";

class Prefill : public DeviceTest {
 protected:
  static void SetUpTestSuite() {
    dir_.emplace("prefill");
    golden::write_synthetic_model(golden::synthetic_preset("tiny"), *dir_ / "tiny.gguf");
    for (const char* arch : {"llama", "bitnet"}) {
      auto other = golden::synthetic_preset("tiny");
      other.architecture = arch;
      golden::write_synthetic_model(other, *dir_ / (std::string("tiny-") + arch + ".gguf"));
    }
  }
  static void TearDownTestSuite() { dir_.reset(); }

  inline static std::optional<TempDir> dir_;
};

std::vector<int32_t> golden_prompt() { return golden::read_npy_i32(kGolden / "prompt.npy").data; }


void expect_logits_close(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  const auto diff = golden::compare_tensors(want, got);
  EXPECT_LE(diff.max_rel_error, bitnet::kGpuTolerance) << what;
  EXPECT_GE(diff.cosine, bitnet::kGpuMinCosine) << what;
}

// After a layer, prefill and decode have summed norms and attention in different orders, so an
// int8 value on a rounding boundary can differ and travel (see golden_check.h): the drift bound.
void expect_close_after_drift(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  const auto diff = golden::compare_tensors(want, got);
  EXPECT_FALSE(diff.nan_or_inf) << what;
  EXPECT_GE(diff.cosine, bitnet::kDriftMinCosine) << what;
}

// `token` is the argmax of `logits` or ties with it within `tolerance` of the largest |logit|.
void expect_greedy(const std::vector<float>& logits, int32_t token, double tolerance, const std::string& what) {
  float best = logits[0], scale = 0;
  for (float v : logits) best = std::max(best, v), scale = std::max(scale, std::fabs(v));
  EXPECT_GE(logits.at(size_t(token)), best - tolerance * scale) << what;
}

// The batched prompt path (matrix-matrix projections, causal attention over the block) gives the
// decode path's logits at every position, and leaves the same KV cache behind.
void expect_prefill_matches_decode(rt::Context& ctx, const fs::path& model, bitnet::PrefillProjections layout) {
  const auto file = models::GgufFile::open(model);
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions options;
  options.prefill_projections = layout;
  bitnet::BitNetModel decode(ctx, file, config), batch(ctx, file, config, options);
  const auto prompt = golden_prompt();
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> argmax;
  for (uint32_t t = 0; t < prompt.size(); ++t) {
    argmax.push_back(decode.step(prompt[t], t).argmax);
    logits.push_back(decode.logits());
  }
  for (size_t k = 1; k <= prompt.size(); ++k) {
    const auto out = batch.prefill(std::span(prompt).first(k), 0);
    const std::string what = "prefill of " + std::to_string(k) + " tokens";
    expect_close_after_drift(logits[k - 1], batch.logits(), what);
    expect_greedy(logits[k - 1], out.argmax, 0.05, what);
  }
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    const auto [dk, dv] = decode.kv_cache(l, uint32_t(prompt.size()));
    const auto [bk, bv] = batch.kv_cache(l, uint32_t(prompt.size()));
    // Layer 0's K and V come from the embeddings through the same quantization: tight.
    auto check = l == 0 ? expect_logits_close : expect_close_after_drift;
    check(dk, bk, "K cache of layer " + std::to_string(l));
    check(dv, bv, "V cache of layer " + std::to_string(l));
  }
  // Two blocks, the second starting at position 3: the same last logits.
  batch.prefill(std::span(prompt).first(3), 0);
  batch.prefill(std::span(prompt).subspan(3), 3);
  expect_close_after_drift(logits.back(), batch.logits(), "prefill in two blocks");
}

TEST_F(Prefill, MatchesDecodeAtEveryPosition) {
  expect_prefill_matches_decode(ctx(), *dir_ / "tiny.gguf", bitnet::PrefillProjections::Auto);
}

// One dispatch per tensor for QKV and gate/up (what tensor cores need), on any device: the same
// logits and cache, ffn_sub_norm's quantize forming relu(gate)^2 * up from the two outputs.
TEST_F(Prefill, WithOneDispatchPerProjectionMatchesDecode) {
  expect_prefill_matches_decode(ctx(), *dir_ / "tiny.gguf", bitnet::PrefillProjections::Separate);
}

// Attention on F16 tensor cores (where the device has them) for every block, whatever its length
// and position (the tuning table asks for long blocks late in the context), in position chunks
// of one K/V tile (the most): the decode path's logits and cache, blocks of one token to the
// whole prompt, and a prompt in two blocks.
TEST_F(Prefill, WithTensorCoreAttentionMatchesDecode) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  const auto target = ops::OpTarget::from(ctx().info());
  if (!ops::attention_prefill_coopmat_supported(target, {config.n_heads, config.n_kv_heads, config.head_dim}))
    GTEST_SKIP() << "device " << ctx().info().name << " runs no prefill attention on tensor cores";
  ops::Tuning tuning = ops::tuning_for(target);
  tuning.prefill_coopmat_attention_from = 0;
  tuning.prefill_coopmat_attention_workgroups = 1;
  tuning.prefill_coopmat_attention_chunk_tiles = 1;
  const ops::ScopedTuning scoped(tuning);  // the table again, however the test ends
  expect_prefill_matches_decode(ctx(), *dir_ / "tiny.gguf", bitnet::PrefillProjections::Auto);
}

// The other graphs: `llama` (no sub-norms: the int8 of attention's output and of silu(gate) * up
// alone; q and k rows reordered for adjacent-pair RoPE) and 1bitLLM's `bitnet` (SiLU), in both
// prompt layouts.
TEST_F(Prefill, MatchesDecodeForEveryArchitecture) {
  for (const char* arch : {"llama", "bitnet"})
    for (auto layout : {bitnet::PrefillProjections::Fused, bitnet::PrefillProjections::Separate}) {
      SCOPED_TRACE(std::string(arch) + (layout == bitnet::PrefillProjections::Fused ? " fused" : " separate"));
      expect_prefill_matches_decode(ctx(), *dir_ / (std::string("tiny-") + arch + ".gguf"), layout);
    }
}

// Q, K and V (and gate and up) write different buffers, so the graph puts no barrier between
// them: the separate layout has the fused layout's steps, with three more dispatches per layer.
TEST_F(Prefill, SeparateProjectionsAddNoBarrier) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  const auto prompt = golden_prompt();
  auto stats_of = [&](bitnet::PrefillProjections layout) {
    bitnet::ModelOptions o;
    o.prefill_projections = layout;
    bitnet::BitNetModel model(ctx(), file, config, o);
    model.prefill(prompt, 0);
    return model.prefill_stats();
  };
  const auto fused = stats_of(bitnet::PrefillProjections::Fused);
  const auto separate = stats_of(bitnet::PrefillProjections::Separate);
  EXPECT_EQ(separate.steps, fused.steps);
  EXPECT_EQ(separate.dispatches, fused.dispatches + 3 * config.n_layers);
}

TEST_F(Prefill, GeneratorPrefillsThePromptAsABatch) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  bitnet::BitNetModel model(ctx(), file, models::BitNetConfig::from_gguf(file));
  models::Generator gen(model);
  models::GenerateOptions o;
  o.sampling.temperature = 0;
  o.max_new_tokens = 16;
  const auto r = gen.generate(golden_prompt(), o);
  ASSERT_EQ(r.tokens.size(), 16u);
  // The prompt token by token through the decode graph chooses the same first token as the batch.
  bitnet::BitNetModel decode(ctx(), file, models::BitNetConfig::from_gguf(file));
  const auto prompt = golden_prompt();
  for (uint32_t t = 0; t < prompt.size(); ++t) decode.step(prompt[t], t);
  expect_greedy(decode.logits(), r.tokens[0], 0.05, "first token");
  // And the continuation is greedy: each token is the argmax of the logits after the previous one
  // (decode's cache drifts from the batch's within the bound above).
  for (size_t i = 0; i + 1 < r.tokens.size(); ++i) {
    decode.step(r.tokens[i], uint32_t(prompt.size() + i));
    expect_greedy(decode.logits(), r.tokens[i + 1], 0.05, "token " + std::to_string(i + 1));
  }
}


}  // namespace
}  // namespace bdsl::test
