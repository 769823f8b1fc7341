// BitNet on the device, end to end, on the tiny synthetic model: the golden per-layer data at every
// prompt position, the greedy continuation, replay, sampling, EOS and the context limit.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <numeric>
#include <set>

#include "device_test.h"
#include "temp_dir.h"
#include "golden/golden_compare.h"
#include "golden/golden_data.h"
#include "golden/npy.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/bitnet_model.h"
#include "models/bitnet/golden_check.h"
#include "models/bitnet/op_local_check.h"
#include "models/generator.h"

namespace bdsl::test {
namespace {
namespace fs = std::filesystem;

const fs::path kGolden = fs::path(BDSL_SOURCE_DIR) / "golden/data/tiny";

class Model : public DeviceTest {
 protected:
  static void SetUpTestSuite() {
    dir_.emplace("model");
    golden::write_synthetic_model(golden::synthetic_preset("tiny"), *dir_ / "tiny.gguf");
    auto small = golden::synthetic_preset("tiny");
    small.context_length = 16;
    golden::write_synthetic_model(small, *dir_ / "tiny-ctx16.gguf");
  }
  static void TearDownTestSuite() { dir_.reset(); }

  inline static std::optional<TempDir> dir_;
};

std::vector<int32_t> golden_prompt() { return golden::read_npy_i32(kGolden / "prompt.npy").data; }

TEST_F(Model, EveryOpMatchesTheReferenceAtEveryPosition) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto report = bitnet::validate_against_golden(ctx(), file, kGolden);
  for (const auto& t : report.local) EXPECT_TRUE(t.pass) << t.name << ": " << bitnet::format_report(report);
  EXPECT_EQ(report.local.size(), 4u * 7 + 2);  // 7 per layer, final norm, logits
  EXPECT_TRUE(report.argmax_mismatches.empty()) << bitnet::format_report(report);
  for (const auto& t : report.tensors) EXPECT_TRUE(t.sane) << t.name << ": " << bitnet::format_report(report);
  EXPECT_GE(report.tensors.size(), 4u * 7 + 4);  // 7 per layer, embedding, norm, output, logits
  EXPECT_TRUE(report.pass()) << bitnet::format_report(report);
  // Free running with bitnet.cpp's rounding points on both sides: the distributions agree closely.
  ASSERT_EQ(report.logits_kl.size(), golden_prompt().size());
  for (double kl : report.logits_kl) EXPECT_LT(kl, 1e-4);
  EXPECT_EQ(report.top1_agree, golden_prompt().size());
  EXPECT_NE(bitnet::format_report(report).find("mean KL divergence"), std::string::npos);
}

// With the exact RMSNorm scale (ModelOptions::exact_norm_scale) the norms are the reference's bit
// for bit: the final norm and every K and V (a norm, exact int32 accumulators, then a division and
// an F16 rounding: a device's division may be an ulp off, but no int8 moves) match with no error
// op by op, and the greedy continuation is the golden one.
TEST_F(Model, ExactNormScaleMatchesTheReferenceBitForBit) {
  if (!ctx().info().float64) GTEST_SKIP() << "the device lacks shaderFloat64";
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto report = bitnet::validate_against_golden(ctx(), file, kGolden, true);
  EXPECT_TRUE(report.pass()) << bitnet::format_report(report);
  size_t exact = 0;
  for (const auto& t : report.local)
    if (t.name == "result_norm" || t.name.starts_with("Kcur") || t.name.starts_with("Vcur")) {
      EXPECT_EQ(t.diff.max_abs_error, 0.0) << t.name << ": " << bitnet::format_report(report);
      ++exact;
    }
  EXPECT_EQ(exact, 1u + 2 * 4);
  EXPECT_EQ(report.continuation, report.expected_continuation);
}

// Without a device with f64 the option is refused by name, not ignored.
TEST_F(Model, ExactNormScaleNeedsFloat64) {
  if (ctx().info().float64) GTEST_SKIP() << "the device has shaderFloat64";
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  bitnet::ModelOptions o;
  o.exact_norm_scale = true;
  EXPECT_THROW(bitnet::BitNetModel(ctx(), file, models::BitNetConfig::from_gguf(file), o), std::invalid_argument);
}

// The check can fail: a model with other weights (another seed) runs consistently op by op —
// the reference follows the same file — but is far from the golden data end to end.
TEST_F(Model, ValidationFailsForAnotherModel) {
  auto other = golden::synthetic_preset("tiny");
  other.seed = golden::kDefaultSyntheticSeed + 1;
  golden::write_synthetic_model(other, *dir_ / "tiny-other.gguf");
  const auto file = models::GgufFile::open(*dir_ / "tiny-other.gguf");
  const auto report = bitnet::validate_against_golden(ctx(), file, kGolden);
  for (const auto& t : report.local) EXPECT_TRUE(t.pass) << t.name;
  size_t insane = 0;
  for (const auto& t : report.tensors) insane += !t.sane;
  EXPECT_GT(insane, report.tensors.size() / 2) << bitnet::format_report(report);
  EXPECT_FALSE(report.pass());
  double worst = 0;
  for (double kl : report.logits_kl) worst = std::max(worst, kl);
  EXPECT_GT(worst, 1e-2) << "another model's logits are another distribution";
}

TEST_F(Model, ReplayingTheRecordingIsDeterministic) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  bitnet::BitNetModel model(ctx(), file, models::BitNetConfig::from_gguf(file));
  const auto prompt = golden_prompt();
  std::vector<std::vector<float>> first;
  for (uint32_t t = 0; t < prompt.size(); ++t) {
    model.step(prompt[t], t);
    first.push_back(model.logits());
  }
  for (uint32_t t = 0; t < prompt.size(); ++t) {  // same positions again: the cache is overwritten
    model.step(prompt[t], t);
    EXPECT_EQ(model.logits(), first[t]) << "position " << t;
  }
  EXPECT_EQ(model.stats().steps, 1 + 5 * 4 + 4u) << "embedding, 5 per layer, norm, head, argmax (2)";
  EXPECT_EQ(model.stats().dispatches, 1 + 5 * 4 + 4u);
}

// Long positions, where a token's positions take several attention chunks, in both attention
// modes: the combine deferred to attn_output (the default) and the combine in attention. Each dumped op at each position must match the op-local reference (the CPU
// recomputing it from the GPU's own inputs) within validate's tolerance: the modes round
// differently (other summation orders), and one int8 flip travels far through a random model, so
// end-to-end logits are not comparable between them.
TEST_F(Model, LongPositionsMatchTheOpLocalReferenceInEveryAttentionMode) {
  auto big = golden::synthetic_preset("tiny");
  big.context_length = 1024;
  golden::write_synthetic_model(big, *dir_ / "tiny-ctx1024.gguf");
  const auto file = models::GgufFile::open(*dir_ / "tiny-ctx1024.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  const bitnet::OpLocalReference reference(file);
  std::vector<int32_t> prompt(600);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7919 + 13) % config.vocab_size);
  bitnet::ModelOptions deferring, combining;
  deferring.dump = combining.dump = true;
  combining.decode_tuning.defer_attention_combine = false;
  for (const auto* options : {&deferring, &combining}) {
    SCOPED_TRACE(options == &deferring ? "deferred combine" : "combine in attention");
    bitnet::BitNetModel model(ctx(), file, config, *options);
    model.prefill(prompt, 0);
    // A pass of the attention kernel is at most 256 positions on the devices the tests run on, so
    // positions 600.. take 3 or more chunks; 16 chunks at most (context 1024), 4 deferred.
    for (uint32_t pos = 600; pos < 603; ++pos) {
      SCOPED_TRACE(testing::Message() << "position " << pos);
      model.step(int32_t(pos % config.vocab_size), pos);
      const auto dumps = model.dumps();
      std::vector<std::vector<float>> k_cache, v_cache;
      for (uint32_t l = 0; l < config.n_layers; ++l) {
        auto [k, v] = model.kv_cache(l, pos + 1);
        k_cache.push_back(std::move(k));
        v_cache.push_back(std::move(v));
      }
      std::map<std::string, std::vector<float>> expected;
      reference.expect(pos, dumps, k_cache, v_cache, expected);
      EXPECT_TRUE(expected.count("kqv_out-1") && expected.count("Qcur-1"));
      for (const auto& [name, want] : expected) {
        if (!dumps.count(name)) continue;  // Kcur / Vcur: the cache rows themselves
        const auto& got = dumps.at(name);
        ASSERT_EQ(got.size(), want.size()) << name;
        double worst = 0, largest = 0;
        for (size_t i = 0; i < want.size(); ++i) {
          worst = std::max(worst, double(std::fabs(got[i] - want[i])));
          largest = std::max(largest, double(std::fabs(want[i])));
        }
        EXPECT_LE(worst, bitnet::kGpuTolerance * largest) << name;
      }
    }
  }
}

TEST_F(Model, SamplingIsReproducibleWithASeed) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  bitnet::ModelOptions with_top_k;
  with_top_k.top_k = 40;
  bitnet::BitNetModel model(ctx(), file, models::BitNetConfig::from_gguf(file), with_top_k);
  models::Generator gen(model);
  models::GenerateOptions o;
  o.max_new_tokens = 20;
  o.sampling = {.temperature = 1.0f, .top_k = 40, .top_p = 0.95f, .seed = 1234};
  const auto a = gen.generate(golden_prompt(), o).tokens;
  gen.reset();
  const auto b = gen.generate(golden_prompt(), o).tokens;
  gen.reset();
  o.sampling.seed = 99;
  const auto c = gen.generate(golden_prompt(), o).tokens;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.size(), 20u);
}

TEST_F(Model, GenerationStopsAtEndOfGeneration) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  bitnet::BitNetModel model(ctx(), file, models::BitNetConfig::from_gguf(file));
  models::Generator gen(model);
  // This device's own greedy continuation (a tiny random model's continuation can change with
  // the last bit of a sum, so not the CPU's: `validate` checks the arithmetic op by op).
  models::GenerateOptions plain;
  plain.sampling.temperature = 0;
  plain.max_new_tokens = 5;
  const auto expected = models::Generator(model).generate(golden_prompt(), plain).tokens;
  ASSERT_EQ(expected.size(), 5u);
  ASSERT_EQ(std::count(expected.begin(), expected.end(), expected[4]), 1) << "the 5th token must be new";
  models::GenerateOptions o;
  o.sampling.temperature = 0;
  o.is_end = [&](int32_t id) { return id == expected[4]; };  // pretend the 5th greedy token is EOS
  const auto r = gen.generate(golden_prompt(), o);
  EXPECT_EQ(r.reason, models::StopReason::EndOfGeneration);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(expected.begin(), expected.begin() + 5));
}

// decode_greedy (the device feeding each argmax to the next step, replays queued, the argmax from
// the int8 shadow of the LM head and the rows that may win) decodes the same tokens as step() by
// step(), and the same cache bit for bit; a stop from the callback ends it there, and the
// model goes on with step() afterwards as if the queued extra step had not run.
TEST_F(Model, GreedyDecodingThatFeedsItselfEqualsStepByStep) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::BitNetModel by_step(ctx(), file, config), fed(ctx(), file, config);
  const auto prompt = golden_prompt();
  const uint32_t n = uint32_t(prompt.size()), steps = 12;
  int32_t last = 0;
  for (uint32_t t = 0; t < n; ++t) last = by_step.step(prompt[t], t).argmax, fed.step(prompt[t], t);
  std::vector<int32_t> want{last};
  for (uint32_t i = 0; i < steps; ++i) want.push_back(by_step.step(want.back(), n + i).argmax);
  std::vector<int32_t> got{last};
  EXPECT_EQ(fed.decode_greedy(last, n, steps, [&](int32_t t) { return got.push_back(t), true; }), steps);
  EXPECT_EQ(got, want);
  // (and with the pruned greedy head, ops/head/lm_head_pruned.h, where every logit was not computed)
  EXPECT_EQ(fed.kv_cache(0, n + steps), by_step.kv_cache(0, n + steps));
  EXPECT_EQ(fed.kv_cache(3, n + steps), by_step.kv_cache(3, n + steps));
  // The pruned head's candidates for the last token: at least every row tied at the largest logit.
  const auto logits = by_step.logits();
  const float top = *std::max_element(logits.begin(), logits.end());
  const auto ties = uint32_t(std::count(logits.begin(), logits.end(), top));
  EXPECT_GE(fed.greedy_candidate_rows(), ties);
  EXPECT_LE(fed.greedy_candidate_rows(), config.vocab_size);
  EXPECT_EQ(by_step.greedy_candidate_rows(), 0u);  // it never ran decode_greedy
  // Stopped after 3 of 12: one more step may have run; step() continues from the 3rd token.
  got.assign(1, last);
  EXPECT_EQ(fed.decode_greedy(last, n, steps, [&](int32_t t) { return got.push_back(t), got.size() < 4; }), 3u);
  EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + 4));
  EXPECT_EQ(fed.step(got.back(), n + 3).argmax, want[4]);
  EXPECT_THROW(fed.decode_greedy(last, config.context_length - 2, 3, [](int32_t) { return true; }), std::out_of_range);
  EXPECT_EQ(fed.decode_greedy(last, n, 0, [](int32_t) { return true; }), 0u);
}

// decode_sampled: the device draws each token from the step's candidates and feeds it to the
// next step; the tokens are the host twin's draws (models::Sampler) step by step, counter = the
// chosen token's position. With the full head (the recording step() replays) and with the pruned
// one (ops/head/lm_head_pruned.h's candidate list, its own recording). The same models then decode
// greedily again (settings rewritten).
// With dumps and candidates for sampling, only the step recording writes the dumps (one set per
// token, in the buffer sized for it), and decode_sampled draws on the host, over every logit too.
TEST_F(Model, DumpsWithSamplingComeFromTheStepRecordingAlone) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 8;
  o.dump = true;
  bitnet::BitNetModel dumping(ctx(), file, config, o);
  o.dump = false;
  bitnet::BitNetModel plain(ctx(), file, config, o);
  const auto prompt = golden_prompt();
  const uint32_t n = uint32_t(prompt.size());
  int32_t last = 0;
  for (uint32_t t = 0; t < n; ++t) last = dumping.step(prompt[t], t).argmax, plain.step(prompt[t], t);
  EXPECT_EQ(dumping.dumps().count("result_output"), 1u);
  for (const models::SamplerOptions sampling : {models::SamplerOptions{0.9f, 0, 0.9f, 0.0f, 3}, models::SamplerOptions{0.9f, 5, 1.0f, 0.0f, 4}}) {
    std::vector<int32_t> a{last}, b{last};
    dumping.decode_sampled(last, n, 6, sampling, [&](int32_t t) { return a.push_back(t), true; });
    plain.decode_sampled(last, n, 6, sampling, [&](int32_t t) { return b.push_back(t), true; });
    EXPECT_EQ(a, b) << "top-k " << sampling.top_k;
  }
}

TEST_F(Model, SampledDecodingThatFeedsItselfEqualsTheHostTwinStepByStep) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 32;
  o.greedy_head = false;  // decode_greedy replays the same recording as decode_sampled
  bitnet::BitNetModel by_step(ctx(), file, config, o), fed(ctx(), file, config, o);
  o.greedy_head = true;
  bitnet::BitNetModel pruned(ctx(), file, config, o);
  ASSERT_TRUE(pruned.pipelines().lm_head_candidate_list) << "the tiny model's shape takes the pruned head";
  const auto prompt = golden_prompt();
  const uint32_t n = uint32_t(prompt.size()), steps = 16;
  int32_t last = 0;
  for (uint32_t t = 0; t < n; ++t) last = by_step.step(prompt[t], t).argmax, fed.step(prompt[t], t), pruned.step(prompt[t], t);
  // top_k 0 draws over every logit (ops/head/sample_vocabulary.h), the others from the candidates.
  // That draw's pipelines and recording are made at its first use, not at load.
  EXPECT_TRUE(fed.vocabulary_operation_names().empty());
  EXPECT_FALSE(fed.pipelines().vocab_draw_final);
  for (const models::SamplerOptions sampling : {models::SamplerOptions{1.2f, 0, 1.0f, 0.0f, 5},
                                                models::SamplerOptions{0.8f, 20, 0.9f, 0.02f, 6},
                                                models::SamplerOptions{0.7f, 3, 1.0f, 0.0f, 7},
                                                models::SamplerOptions{0.9f, 0, 0.9f, 0.0f, 8},
                                                models::SamplerOptions{1.0f, 0, 0.5f, 0.05f, 9}}) {
    const models::Sampler twin(sampling);
    const bool vocabulary = models::draws_over_vocabulary(sampling);
    std::vector<int32_t> want{last};
    for (uint32_t i = 0; i < steps; ++i) {
      const auto out = by_step.step(want.back(), n + i);
      want.push_back(vocabulary ? twin.sample_vocabulary(by_step.logits(), n + i + 1)
                                : twin.sample(out.top_ids, out.top_logits, n + i + 1));
    }
    for (bitnet::BitNetModel* m : {&fed, &pruned}) {
      std::vector<int32_t> got{last};
      EXPECT_EQ(m->decode_sampled(last, n, steps, sampling, [&](int32_t t) { return got.push_back(t), true; }), steps);
      EXPECT_EQ(got, want) << "temperature " << sampling.temperature << (m == &pruned ? ", pruned head" : ", full head");
    }
    EXPECT_GT(std::set<int32_t>(want.begin(), want.end()).size(), 3u);
    if (vocabulary) continue;
    // The list held at least the rows the draw may take, and the pruned head ran.
    EXPECT_GE(pruned.sampled_candidate_rows(), sampling.top_k);
    EXPECT_LE(pruned.sampled_candidate_rows(), config.vocab_size);
  }
  EXPECT_EQ(fed.sampled_candidate_rows(), 0u);  // no pruned head
  EXPECT_FALSE(fed.vocabulary_operation_names().empty());
  std::vector<int32_t> greedy{last};
  for (uint32_t i = 0; i < steps; ++i) greedy.push_back(by_step.step(greedy.back(), n + i).argmax);
  for (bitnet::BitNetModel* m : {&fed, &pruned}) {
    std::vector<int32_t> got{last};
    m->decode_greedy(last, n, steps, [&](int32_t t) { return got.push_back(t), true; });
    EXPECT_EQ(got, greedy) << "after sampling, the model decodes greedily again";
  }
  bitnet::BitNetModel greedy_only(ctx(), file, config);
  EXPECT_THROW(greedy_only.decode_sampled(last, n, 1, {1.0f, 0, 1.0f, 0.0f, 1}, [](int32_t) { return true; }),
               std::invalid_argument);
}

TEST_F(Model, GenerationStopsWhenTheContextIsFull) {
  const auto file = models::GgufFile::open(*dir_ / "tiny-ctx16.gguf");
  bitnet::BitNetModel model(ctx(), file, models::BitNetConfig::from_gguf(file));
  models::Generator gen(model);
  models::GenerateOptions o;
  o.max_new_tokens = 100;
  o.sampling.temperature = 0;
  const auto r = gen.generate(golden_prompt(), o);  // 8 prompt tokens in a context of 16
  EXPECT_EQ(r.reason, models::StopReason::ContextFull);
  EXPECT_EQ(r.tokens.size(), 16u - 8u + 1u);  // the last one is chosen from position 15's logits
  EXPECT_EQ(gen.position(), 16u);
  EXPECT_THROW(gen.generate(golden_prompt(), o), std::length_error);
  EXPECT_THROW(model.step(1, 16), std::out_of_range);
  EXPECT_THROW(model.step(5000, 0), std::out_of_range);
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

TEST_F(Model, SamplingCandidatesAreTheLargestLogits) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  bitnet::ModelOptions o;
  o.top_k = 16;
  bitnet::BitNetModel model(ctx(), file, models::BitNetConfig::from_gguf(file), o);
  const auto out = model.step(golden_prompt()[0], 0);
  auto logits = model.logits();
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  ASSERT_EQ(out.top_ids.size(), 16u);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(out.top_ids[i], order[i]) << i;
    EXPECT_EQ(out.top_logits[i], logits[order[i]]) << i;
  }
  EXPECT_EQ(out.argmax, order[0]);
  // Embedding, five steps a layer, then norm, head, the partial passes, the final passes, the draw.
  EXPECT_EQ(model.stats().steps, 1 + 5 * 4 + 5u) << "top-k runs beside argmax, not after it";
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

TEST_F(Model, AModelThatDoesNotFitIsRefusedBeforeAllocating) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  try {
    bitnet::upload_weights(ctx(), file, config, config.vocab_size, uint64_t{1} << 50);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("tiny.gguf"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MiB of device memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find(ctx().info().name), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

// The host twin of a generation with a repeat penalty: the prompt but its last token as one batch,
// then step by step, each step's logits penalized over the window (models::apply_repeat_penalty)
// and chosen as the device's sampler does.
std::vector<int32_t> penalized_on_host(bitnet::BitNetModel& m, const std::vector<int32_t>& prompt,
                                       const models::SamplerOptions& s, uint32_t steps) {
  const models::Sampler twin(s);
  std::vector<int32_t> history(prompt.begin(), prompt.end() - 1), out;
  m.prefill(history, 0);
  int32_t token = prompt.back();
  for (uint32_t i = 0; i < steps; ++i) {
    const auto pos = uint32_t(history.size());
    m.step(token, pos);
    history.push_back(token);
    std::vector<float> logits = m.logits();
    const size_t window = std::min<size_t>(s.repeat_last_n, history.size());
    models::apply_repeat_penalty(logits, std::span(history).last(window), s.repeat_penalty);
    if (s.temperature == 0) {
      token = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());  // the first of ties
    } else if (models::draws_over_vocabulary(s)) {
      token = twin.sample_vocabulary(logits, pos + 1);
    } else {  // the model's top_k candidates, most likely first (ties: the lower id)
      std::vector<int32_t> ids(logits.size());
      std::iota(ids.begin(), ids.end(), 0);
      std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
      ids.resize(m.top_k());
      std::vector<float> values;
      for (int32_t id : ids) values.push_back(logits[id]);
      token = twin.sample(ids, values, pos + 1);
    }
    out.push_back(token);
  }
  return out;
}

TEST_F(Model, RepeatPenaltyInTheDeviceSamplerEqualsTheHostTwin) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 32;
  bitnet::BitNetModel twin_model(ctx(), file, config, o), device(ctx(), file, config, o), greedy_only(ctx(), file, config);
  const auto prompt = golden_prompt();
  const uint32_t steps = 16;
  auto generate = [&](bitnet::BitNetModel& m, const models::SamplerOptions& s) {
    models::Generator gen(m);
    models::GenerateOptions g;
    g.max_new_tokens = steps;
    g.sampling = s;
    return gen.generate(prompt, g).tokens;
  };
  models::SamplerOptions greedy;
  greedy.temperature = 0;
  greedy.repeat_penalty = 1.5f;
  models::SamplerOptions boost = greedy;  // below 1: the window's tokens more likely, a 3-token window
  boost.repeat_penalty = 0.5f;
  boost.repeat_last_n = 3;
  const models::SamplerOptions top_k{0.8f, 20, 0.9f, 0.02f, 6, 1.3f, 8};
  const models::SamplerOptions vocabulary{0.9f, 0, 0.9f, 0.0f, 8, 1.2f, 64};
  for (const models::SamplerOptions& s : {greedy, boost, top_k, vocabulary}) {
    const auto want = penalized_on_host(twin_model, prompt, s, steps);
    EXPECT_EQ(generate(device, s), want) << "penalty " << s.repeat_penalty << ", temperature " << s.temperature;
    if (s.temperature == 0) {
      EXPECT_EQ(generate(greedy_only, s), want) << "greedy-only model, penalty " << s.repeat_penalty;
    }
  }
  // The penalty changes the text: the tiny model's greedy continuation repeats a token.
  models::SamplerOptions plain = greedy;
  plain.repeat_penalty = 1.0f;
  const auto unpenalized = generate(device, plain);
  EXPECT_NE(unpenalized, generate(device, greedy));
  std::map<int32_t, int> counts;
  for (int32_t t : unpenalized) ++counts[t];
  EXPECT_GE(std::max_element(counts.begin(), counts.end(), [](auto& a, auto& b) { return a.second < b.second; })->second, 4);
  // A window past the device's is refused.
  models::SamplerOptions bad = greedy;
  bad.repeat_last_n = models::kMaxRepeatLastN + 1;
  EXPECT_THROW(generate(device, bad), std::invalid_argument);
}

}  // namespace
}  // namespace bdsl::test
