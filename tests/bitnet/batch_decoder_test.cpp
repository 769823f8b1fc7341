// Many sequences in one decode step (BitNetBatchDecoder) on the tiny model: a sequence's greedy
// tokens are the same alone or beside others, in any slot, after the slot served another
// sequence, with its prompt prefilled or run in the steps however split; and a bad step is
// refused, naming what is wrong.
#include <algorithm>
#include <bit>
#include <deque>
#include <filesystem>
#include <set>
#include <string>

#include "device_test.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/batch_decoder.h"
#include "models/bitnet/bitnet_model.h"

namespace bdsl::test {
namespace {
namespace fs = std::filesystem;

class BatchDecoder : public DeviceTest {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("bdsl-batch-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    golden::write_synthetic_model(golden::synthetic_preset("tiny"), dir_ / "tiny.gguf");
    auto llama = golden::synthetic_preset("tiny");
    llama.architecture = "llama";
    golden::write_synthetic_model(llama, dir_ / "tiny-llama.gguf");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
};
fs::path BatchDecoder::dir_;

std::vector<int32_t> prompt_of(uint32_t seed, uint32_t length, uint32_t vocab) {
  std::vector<int32_t> p(length);
  for (uint32_t i = 0; i < length; ++i) p[i] = int32_t((seed * 7919u + i * 104729u + 13u) % vocab);
  return p;
}

struct Stream {
  uint32_t slot;
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;  // generated
  std::vector<std::vector<float>> top_logits;  // each decode step's candidates (with a top-k model)
  bool via_prefill = false;  // run_in_steps: the prompt goes through prefill() first
  models::SamplerOptions sampling{};  // greedy unless set
  std::vector<std::vector<float>> logits;  // each decode step's every logit, where returned
};

// Prefills every stream (in chunks of `chunk`), then decodes them together for `steps` steps.
void run_together(bitnet::BitNetBatchDecoder& dec, std::vector<Stream>& streams, uint32_t steps, uint32_t chunk = 512) {
  for (auto& s : streams) {
    models::StepOutput out;
    for (uint32_t first = 0; first < s.prompt.size(); first += chunk) {
      const uint32_t n = std::min<uint32_t>(chunk, uint32_t(s.prompt.size()) - first);
      out = dec.prefill(s.slot, std::span(s.prompt).subspan(first, n), first, s.sampling);
    }
    s.tokens = {out.token};
  }
  for (uint32_t i = 1; i < steps; ++i) {
    std::vector<models::BatchDecoder::Entry> batch;
    for (const auto& s : streams)
      batch.push_back({s.slot, s.tokens.back(), uint32_t(s.prompt.size() + s.tokens.size() - 1), s.sampling});
    const auto outs = dec.decode(batch);
    ASSERT_EQ(outs.size(), streams.size());
    for (size_t j = 0; j < streams.size(); ++j) {
      if (streams[j].sampling.temperature == 0) {
        EXPECT_EQ(outs[j].token, outs[j].argmax);
      }
      if (!outs[j].top_ids.empty()) {  // the device's draw is the host twin's on the same candidates or logits
        EXPECT_EQ(outs[j].token, models::choose_on_host(outs[j], streams[j].sampling, batch[j].pos + 1)) << "step " << i;
      }
      streams[j].tokens.push_back(outs[j].token);
      streams[j].top_logits.push_back(outs[j].top_logits);
      streams[j].logits.push_back(outs[j].logits);
    }
  }
}

// The same tokens, and every step's 8 candidate logits the same bits.
void expect_same_candidates(const Stream& got, const Stream& want, const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.top_logits.size(), want.top_logits.size()) << what;
  for (size_t i = 0; i < want.top_logits.size(); ++i) {
    ASSERT_EQ(want.top_logits[i].size(), 8u) << what;
    ASSERT_EQ(got.top_logits[i].size(), 8u) << what;
    for (size_t j = 0; j < 8; ++j)
      EXPECT_EQ(std::bit_cast<uint32_t>(got.top_logits[i][j]), std::bit_cast<uint32_t>(want.top_logits[i][j]))
          << what << " step " << i << " candidate " << j;
  }
}

// Every stream's prompt runs as entries of the decode steps, at most `per_step` of its tokens a
// step (via_prefill: through prefill() first), beside the streams already decoding, until each
// has `steps` tokens. A run's entries before its last have no output.
void run_in_steps(bitnet::BitNetBatchDecoder& dec, std::vector<Stream>& streams, uint32_t steps, uint32_t per_step) {
  std::vector<uint32_t> fed(streams.size(), 0);
  for (size_t j = 0; j < streams.size(); ++j) {
    auto& s = streams[j];
    s.tokens.clear(), s.top_logits.clear();
    if (!s.via_prefill) continue;
    const auto out = dec.prefill(s.slot, s.prompt, 0, s.sampling);
    fed[j] = uint32_t(s.prompt.size());
    s.tokens = {out.token};
    s.top_logits = {out.top_logits};
  }
  for (;;) {
    std::vector<models::BatchDecoder::Entry> batch;
    std::vector<size_t> owner;
    std::vector<bool> prompt;
    for (size_t j = 0; j < streams.size(); ++j) {
      const auto& s = streams[j];
      if (fed[j] < s.prompt.size()) {
        for (uint32_t p = fed[j]; p < s.prompt.size() && p < fed[j] + per_step; ++p)
          batch.push_back({s.slot, s.prompt[p], p, s.sampling}), owner.push_back(j), prompt.push_back(true);
      } else if (s.tokens.size() < steps) {
        batch.push_back({s.slot, s.tokens.back(), uint32_t(s.prompt.size() + s.tokens.size() - 1), s.sampling});
        owner.push_back(j), prompt.push_back(false);
      }
    }
    if (batch.empty()) return;
    const auto outs = dec.decode(batch);
    ASSERT_EQ(outs.size(), batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const size_t j = owner[i];
      if (i + 1 < batch.size() && owner[i + 1] == j) {
        EXPECT_EQ(outs[i].argmax, -1) << "a run's entry before its last";
        EXPECT_TRUE(outs[i].top_logits.empty());
      }
      if (prompt[i] && ++fed[j] < streams[j].prompt.size()) continue;  // the prompt goes on
      streams[j].tokens.push_back(outs[i].token);
      streams[j].top_logits.push_back(outs[i].top_logits);
    }
  }
}

TEST_F(BatchDecoder, GreedyTokensAreTheSameAloneOrBesideOthersInAnySlot) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::BitNetModel model(ctx(), file, config);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 4);
  const uint32_t v = config.vocab_size, steps = 12;

  std::vector<Stream> alone = {{0, prompt_of(1, 9, v), {}}};
  run_together(dec, alone, steps);
  ASSERT_EQ(alone[0].tokens.size(), steps);

  // The same sequence in slot 2 beside three others of other lengths, its prompt in chunks of 4.
  std::vector<Stream> crowd = {{0, prompt_of(2, 5, v), {}}, {1, prompt_of(3, 17, v), {}}, {2, prompt_of(1, 9, v), {}},
                               {3, prompt_of(4, 3, v), {}}};
  run_together(dec, crowd, steps, 4);
  EXPECT_EQ(crowd[2].tokens, alone[0].tokens);

  // The others alone give what they gave in the crowd.
  for (size_t i : {0u, 1u, 3u}) {
    std::vector<Stream> one = {{crowd[i].slot, crowd[i].prompt, {}}};
    run_together(dec, one, steps);
    EXPECT_EQ(one[0].tokens, crowd[i].tokens) << "slot " << crowd[i].slot;
  }
  EXPECT_EQ(dec.bucket_for(3), 4u);
  // Every op is one dispatch for all the lanes, whatever the bucket; a bucket of one normalizes
  // inside its projections (ops/tuning.h's step_norm_fused_max_tokens): four dispatches fewer a layer.
  EXPECT_GT(dec.step_stats(1).dispatches, 0u);
  EXPECT_EQ(dec.step_stats(4).dispatches, dec.step_stats(1).dispatches + 4 * config.n_layers);
}

// The batch's kernels are the prompt path's (norm and quantization per token, matrix-matrix
// projections) and the decode attention: other summation orders than the single-sequence decode
// graph, and on the tiny model the same greedy tokens (as prefill and decode agree at every
// position, Prefill.MatchesDecodeAtEveryPosition). A wrong slot, position or cache row would
// not.
// `distinct`: the fewest different tokens a stream's continuation must hold (a check that can fail).
void expect_greedy_tokens_of_the_single_sequence_model(rt::Context& ctx, const fs::path& path, size_t distinct) {
  const auto file = models::GgufFile::open(path);
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::BitNetModel model(ctx, file, config), reference(ctx, file, config);
  bitnet::BitNetBatchDecoder dec(ctx, model, 2);
  const uint32_t steps = 16;
  std::vector<Stream> streams = {{0, prompt_of(6, 4, config.vocab_size), {}}, {1, prompt_of(5, 11, config.vocab_size), {}}};
  run_together(dec, streams, steps, 3);
  for (const auto& s : streams) {
    std::vector<int32_t> expected = {reference.prefill(s.prompt, 0).argmax};
    reference.decode_greedy(expected[0], uint32_t(s.prompt.size()), steps - 1, [&](int32_t t) {
      expected.push_back(t);
      return true;
    });
    EXPECT_EQ(s.tokens, expected) << "slot " << s.slot;
    EXPECT_GE(std::set<int32_t>(s.tokens.begin(), s.tokens.end()).size(), distinct) << "a continuation that varies";
  }
}

TEST_F(BatchDecoder, GreedyTokensAreTheSingleSequenceModels) {
  expect_greedy_tokens_of_the_single_sequence_model(ctx(), dir_ / "tiny.gguf", 4);
}

// `llama`'s graph (no sub-norms, SiLU, reordered q and k rows) in the batch: the same. The tiny
// random `llama` settles on one token after a few steps (without sub-norms its FFN output swamps
// the residual stream); its logits are checked against decode by Prefill.MatchesDecodeForEveryArchitecture
// (the prompt path's kernels are the batch's).
TEST_F(BatchDecoder, GreedyTokensAreTheSingleSequenceModelsForLlama) {
  expect_greedy_tokens_of_the_single_sequence_model(ctx(), dir_ / "tiny-llama.gguf", 1);
}

// Stronger than the tokens: the candidates' logits are the same bits in a bucket of one lane and
// in a bucket of four, and with the projections fused (QKV in one dispatch, relu(gate)^2 * up in
// gate/up's epilogue) or separate (one dispatch a tensor, the product formed by the quantizer),
// each bucket with its own token tile.
TEST_F(BatchDecoder, CandidateLogitsAreTheSameBitsInEveryBucketAndLayout) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 8;
  bitnet::BitNetModel fused_model(ctx(), file, config, o), separate_model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder fused(ctx(), fused_model, 4,
                                   {.projections = bitnet::PrefillProjections::Fused, .return_candidates = true});
  bitnet::BitNetBatchDecoder separate(
      ctx(), separate_model, 4,
      {.projections = bitnet::PrefillProjections::Separate, .subgroup_max_tokens = 1, .return_candidates = true});
  const uint32_t v = config.vocab_size, steps = 6;
  std::vector<Stream> alone = {{0, prompt_of(8, 7, v), {}, {}}};
  run_together(fused, alone, steps);
  for (auto* dec : {&fused, &separate}) {
    std::vector<Stream> crowd = {{0, prompt_of(9, 5, v), {}, {}}, {1, prompt_of(10, 2, v), {}, {}},
                                 {3, prompt_of(8, 7, v), {}, {}}};
    run_together(*dec, crowd, steps);
    expect_same_candidates(crowd[2], alone[0], dec == &fused ? "fused" : "separate");
  }
}

// A prompt run in the steps: each token is a lane of its own, so a sequence's candidates are the
// same bits whether its prompt ran in one step or split over three beside other streams (one
// decoding after prefill(), one with a prompt run of its own), and its tokens are the ones the
// prefill path gives (other summation orders, the same greedy tokens on the tiny model).
TEST_F(BatchDecoder, PromptRunsInStepsGiveTheSameBitsHoweverSplitAndBesideOthers) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 8;
  bitnet::BitNetModel model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 4, {.return_candidates = true});
  const uint32_t v = config.vocab_size, steps = 8;
  std::vector<Stream> alone = {{2, prompt_of(11, 9, v), {}, {}}};
  run_in_steps(dec, alone, steps, 9);
  ASSERT_EQ(alone[0].tokens.size(), steps);

  std::vector<Stream> crowd = {{0, prompt_of(12, 6, v), {}, {}, true}, {1, prompt_of(13, 3, v), {}, {}},
                               {3, prompt_of(11, 9, v), {}, {}}};
  run_in_steps(dec, crowd, steps, 4);
  ASSERT_EQ(crowd[2].top_logits.size(), steps);
  expect_same_candidates(crowd[2], alone[0], "split over steps");

  std::vector<Stream> prefilled = {{1, prompt_of(11, 9, v), {}}};
  run_together(dec, prefilled, steps);
  EXPECT_EQ(prefilled[0].tokens, alone[0].tokens);

  // Slot 1 held a prefilled sequence (the model's own cache still has its rows); a new one whose
  // prompt starts in a step and goes on through prefill() must not see the old rows.
  std::vector<int32_t> tokens(crowd[1].prompt);  // any prompt of 3, then 6 more
  const auto more = prompt_of(14, 6, v);
  tokens.insert(tokens.end(), more.begin(), more.end());
  dec.decode(std::vector<models::BatchDecoder::Entry>{{1, tokens[0], 0}, {1, tokens[1], 1}, {1, tokens[2], 2}});
  const int32_t mixed = dec.prefill(1, std::span(tokens).subspan(3), 3).token;
  std::vector<Stream> whole = {{2, tokens, {}}};
  run_together(dec, whole, 1);
  EXPECT_EQ(mixed, whole[0].tokens[0]);
}

// Small buckets normalize and quantize each token inside the projections' workgroups; the same
// steps with the norms as dispatches of their own give the same bits, in buckets of 1, 2 and 4.
TEST_F(BatchDecoder, NormsInsideTheProjectionsGiveTheSameBits) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 8;
  bitnet::BitNetModel fused_model(ctx(), file, config, o), apart_model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder fused(ctx(), fused_model, 4, {.norm_fused_max_tokens = 4, .return_candidates = true});
  bitnet::BitNetBatchDecoder apart(ctx(), apart_model, 4, {.norm_fused_max_tokens = -1, .return_candidates = true});
  const uint32_t v = config.vocab_size, steps = 5;
  for (uint32_t streams : {1u, 2u, 3u}) {
    std::vector<Stream> a, b;
    for (uint32_t i = 0; i < streams; ++i) {
      a.push_back({i, prompt_of(20 + i, 4 + 3 * i, v), {}, {}});
      b.push_back(a.back());
    }
    run_in_steps(fused, a, steps, 1);  // one prompt token a step: every step in a small bucket
    run_in_steps(apart, b, steps, 1);
    for (uint32_t i = 0; i < streams; ++i) {
      ASSERT_EQ(a[i].top_logits.size(), steps);
      expect_same_candidates(a[i], b[i], std::to_string(streams) + " streams, stream " + std::to_string(i));
    }
  }
  EXPECT_LT(fused.step_stats(1).dispatches, apart.step_stats(1).dispatches) << "the norms are not dispatches";
}

// Attention leaves its chunks' combine to the consumer (BatchOptions::defer_attention_combine):
// attn_output's prologue in the one-lane bucket, which normalizes inside the projections, and
// attn_sub_norm's quantize (ops::attention_output_quantize) where the norms are dispatches. The
// same bits as attention combining them itself, at positions of one to four chunks, alone or
// beside another (two chunks a workgroup there, where the quantize merges).
TEST_F(BatchDecoder, AttentionCombinedByItsConsumerGivesTheSameBits) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 8;
  bitnet::BitNetModel model_a(ctx(), file, config, o), model_b(ctx(), file, config, o), model_c(ctx(), file, config, o);
  const bitnet::BatchOptions short_passes{.attention_chunks = 4, .attention_positions_per_pass = 1, .return_candidates = true};
  bitnet::BatchOptions in_attn_output = short_passes, in_quantize = short_passes, in_attention = short_passes;
  in_attn_output.norm_fused_max_tokens = 1;
  in_quantize.norm_fused_max_tokens = -1;
  in_quantize.attention_spread_lanes = 1;  // two chunks a workgroup from two lanes on
  in_attention.norm_fused_max_tokens = -1;
  in_attention.defer_attention_combine = false;
  bitnet::BitNetBatchDecoder a(ctx(), model_a, 3, in_attn_output), b(ctx(), model_b, 3, in_quantize), c(ctx(), model_c, 3, in_attention);
  // Decode steps from position 40 (two chunks) to 99: four chunks from 3 passes + 1 on (one
  // chunk: the DeferredCombine op tests).
  const uint32_t v = config.vocab_size, prompt = 40, steps = 60;
  ops::SplitKvTuning one_position;
  one_position.positions_per_pass = 1;
  const uint32_t pass = ops::attention_pass(ops::OpTarget::from(ctx().info()), {config.n_heads, config.n_kv_heads, config.head_dim},
                                            one_position);
  ASSERT_GE(prompt + steps - 1, 3 * pass + 1) << "the steps do not reach four chunks";
  ASSERT_GE(prompt, pass) << "the steps start past one chunk";
  std::vector<Stream> alone_a = {{0, prompt_of(70, prompt, v), {}, {}}}, alone_b = alone_a, alone_c = alone_a;
  run_together(a, alone_a, steps);
  run_together(b, alone_b, steps);
  run_together(c, alone_c, steps);
  expect_same_candidates(alone_a[0], alone_c[0], "alone, attn_output merging");
  expect_same_candidates(alone_b[0], alone_c[0], "alone, the quantize merging");
  auto has = [](const bitnet::BitNetBatchDecoder& d, const char* part) {
    const auto names = d.step_operation_names(d.bucket_for(1));
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; });
  };
  EXPECT_TRUE(has(a, "_deferred") && has(a, "_merging")) << "attn_output does not merge";
  EXPECT_TRUE(has(b, "_deferred") && has(b, "quantize_attention_output")) << "the quantize does not merge";
  EXPECT_FALSE(has(c, "_deferred"));
  for (bitnet::BitNetBatchDecoder* d : {&a, &b}) {
    std::vector<Stream> crowd = {{1, prompt_of(70, prompt, v), {}, {}}, {2, prompt_of(71, 30, v), {}, {}}};
    run_together(*d, crowd, steps);
    expect_same_candidates(crowd[0], alone_c[0], d == &a ? "beside another" : "beside another, the quantize merging");
  }
}

// Buckets whose QKV is one dispatch rotate q and k and write the cache rows in its epilogue; the
// same steps with RoPE as a dispatch of its own give the same bits, with the norms inside the
// projections or apart, and one dispatch fewer a layer.
TEST_F(BatchDecoder, RopeInTheQkvEpilogueGivesTheSameBits) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 8;
  for (int norms : {4, -1}) {
    bitnet::BitNetModel in_model(ctx(), file, config, o), apart_model(ctx(), file, config, o);
    bitnet::BitNetBatchDecoder in(ctx(), in_model, 4, {.norm_fused_max_tokens = norms, .rope_in_qkv = true, .return_candidates = true});
    bitnet::BitNetBatchDecoder apart(ctx(), apart_model, 4,
                                     {.norm_fused_max_tokens = norms, .rope_in_qkv = false, .return_candidates = true});
    const uint32_t v = config.vocab_size, steps = 5;
    std::vector<Stream> a, b;
    for (uint32_t i = 0; i < 3; ++i) {
      a.push_back({i, prompt_of(30 + i, 4 + 3 * i, v), {}, {}});
      b.push_back(a.back());
    }
    run_in_steps(in, a, steps, 2);  // prompt tokens two a step: runs of one sequence in a step
    run_in_steps(apart, b, steps, 2);
    for (uint32_t i = 0; i < 3; ++i) {
      ASSERT_EQ(a[i].top_logits.size(), steps);
      expect_same_candidates(a[i], b[i], "norms " + std::to_string(norms) + ", stream " + std::to_string(i));
    }
    EXPECT_EQ(in.step_stats(4).dispatches + config.n_layers, apart.step_stats(4).dispatches) << "RoPE is not a dispatch";
  }
}

// Attention's chunks taken several to a workgroup in the larger buckets, and the smaller ones' KV
// heads split over more workgroups: the same bits as a workgroup a chunk everywhere with one
// split. One position a row group per pass, so the tiny model's short sequences span all 4
// chunks; three streams together (bucket 4), then one alone (bucket 1).
TEST_F(BatchDecoder, AttentionWorkgroupLayoutsGiveTheSameBits) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 8;
  bitnet::BitNetModel a_model(ctx(), file, config, o), b_model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder plain(ctx(), a_model, 4,
                                   {.attention_chunks = 4, .attention_head_split = 2, .attention_positions_per_pass = 1,
                                    .attention_spread_lanes = 64, .attention_chunks_per_workgroup = 1,
                                    .attention_spread_head_split = 2, .return_candidates = true});
  bitnet::BitNetBatchDecoder grouped(ctx(), b_model, 4,
                                     {.attention_chunks = 4, .attention_head_split = 1, .attention_positions_per_pass = 1,
                                      .attention_spread_lanes = 1, .attention_chunks_per_workgroup = 3,
                                      .attention_spread_head_split = 4, .return_candidates = true});
  const uint32_t v = config.vocab_size, steps = 5;
  std::vector<Stream> a, b;
  for (uint32_t i = 0; i < 3; ++i) {
    a.push_back({i, prompt_of(40 + i, 50 + 9 * i, v), {}, {}});  // past 48 positions: 4 chunks of a pass of one position a row group
    b.push_back(a.back());
  }
  run_together(plain, a, steps);
  run_together(grouped, b, steps);
  for (uint32_t i = 0; i < 3; ++i) expect_same_candidates(a[i], b[i], "stream " + std::to_string(i));
  std::vector<Stream> alone_a = {{3, prompt_of(44, 60, v), {}, {}}}, alone_b = alone_a;
  run_together(plain, alone_a, steps);
  run_together(grouped, alone_b, steps);
  expect_same_candidates(alone_a[0], alone_b[0], "alone");
  EXPECT_EQ(grouped.bucket_for(1), 1u);
}

// Sampling on the device: each output's token is the host twin's draw from the same candidates
// (checked at every step by run_together), and a sequence sampled beside others, with other
// seeds and settings, draws the same tokens as alone (its draws depend on its seed and positions
// only); with another seed it draws others.
// top_k 0 draws over every logit (ops/head/sample_vocabulary.h), beside a stream that draws from
// its top 10 candidates and a greedy one in the same steps. The full head in f32 (not on tensor
// cores, where x is rounded to F16): its candidates are then the logits the top-k draws take from
// the pruned head's lists, and the host twin's draw from them is the device's.
TEST_F(BatchDecoder, SampledTokensAreTheSameAloneOrBesideOthers) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 32;
  bitnet::BitNetModel model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 5, {.tensor_core_head = false, .return_candidates = true});
  const uint32_t v = config.vocab_size, steps = 16;
  const models::SamplerOptions hot{1.5f, 0, 1.0f, 0.0f, 7};
  std::vector<Stream> alone = {{1, prompt_of(30, 5, v), {}}};
  alone[0].sampling = hot;
  run_together(dec, alone, steps);

  std::vector<Stream> crowd = {{0, prompt_of(31, 8, v), {}}, {2, prompt_of(30, 5, v), {}}, {3, prompt_of(32, 3, v), {}}};
  crowd[0].sampling = {0.8f, 10, 0.9f, 0.05f, 8};
  crowd[1].sampling = hot;
  crowd[2].sampling = {1.5f, 0, 0.9f, 0.0f, 8};  // over the vocabulary with a top-p cut, another seed
  crowd.push_back({4, prompt_of(33, 4, v), {}});  // greedy
  run_together(dec, crowd, steps, 2);
  EXPECT_EQ(crowd[1].tokens, alone[0].tokens);

  std::vector<Stream> reseeded = {{1, prompt_of(30, 5, v), {}}};
  reseeded[0].sampling = {1.5f, 0, 1.0f, 0.0f, 8};
  run_together(dec, reseeded, steps);
  EXPECT_NE(reseeded[0].tokens, alone[0].tokens) << "another seed draws another text";
  std::vector<Stream> greedy = {{1, prompt_of(30, 5, v), {}}};
  run_together(dec, greedy, steps);
  EXPECT_NE(greedy[0].tokens, alone[0].tokens) << "a hot sampler leaves the greedy path";
}

// Draws from the top-k take the pruned head's candidate lists: each sequence's tokens are the
// single-sequence model's decode_sampled (its pruned head: the same exact logits and draw), with
// greedy and whole-vocabulary draws beside it or not (a step with a draw over the vocabulary runs
// the full head too, and its top-k only where returned candidates need it: the same draw either
// way); without the pruned head the batch draws from the full head's top-k, here
// the same tokens (lm_head_batch's logits are lm_head's bits where the head is not on tensor cores).
TEST_F(BatchDecoder, SampledTokensAreTheSingleSequenceModels) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 32;
  bitnet::BitNetModel model(ctx(), file, config, o), reference(ctx(), file, config, o);
  ASSERT_TRUE(reference.pipelines().lm_head_candidate_list) << "the tiny model's shape takes the pruned head";
  bitnet::BitNetBatchDecoder dec(ctx(), model, 4);
  const uint32_t v = config.vocab_size, steps = 14;
  std::vector<Stream> streams = {{0, prompt_of(40, 6, v), {}}, {2, prompt_of(41, 3, v), {}}};
  streams[0].sampling = {0.9f, 20, 0.95f, 0.0f, 11};
  streams[1].sampling = {1.3f, 5, 1.0f, 0.02f, 12};
  run_together(dec, streams, steps, 4);
  auto alone = [&](const Stream& s) {  // the single-sequence model's prefill, then decode_sampled
    auto first = reference.prefill(s.prompt, 0);
    std::vector<int32_t> expected = {models::choose_after_step(reference, first, s.sampling, uint32_t(s.prompt.size()))};
    reference.decode_sampled(expected[0], uint32_t(s.prompt.size()), steps - 1, s.sampling, [&](int32_t t) {
      expected.push_back(t);
      return true;
    });
    return expected;
  };
  for (const auto& s : streams) {
    EXPECT_EQ(s.tokens, alone(s)) << "slot " << s.slot;
    EXPECT_GE(std::set<int32_t>(s.tokens.begin(), s.tokens.end()).size(), 4u) << "a continuation that varies";
  }
  // Beside a greedy stream and one drawn over the whole vocabulary: the same tokens. The draw
  // over the vocabulary is decode_sampled's too (lm_head's f32 logits, on tensor cores as well).
  std::vector<Stream> crowd = {{1, prompt_of(42, 5, v), {}}, {3, prompt_of(40, 6, v), {}}, {0, prompt_of(43, 4, v), {}}};
  crowd[1].sampling = streams[0].sampling;
  crowd[2].sampling = {1.0f, 0, 1.0f, 0.0f, 13};
  run_together(dec, crowd, steps, 4);
  EXPECT_EQ(crowd[1].tokens, streams[0].tokens);
  EXPECT_EQ(crowd[2].tokens, alone(crowd[2])) << "the draw over the vocabulary";
  EXPECT_GE(std::set<int32_t>(crowd[2].tokens.begin(), crowd[2].tokens.end()).size(), 4u) << "a continuation that varies";
  // The draw over the vocabulary the same where its tail also runs the full head's top-k (for the
  // candidates returned: then checked against the host twin's draw too) and where it does not.
  bitnet::BitNetBatchDecoder with_candidates(ctx(), model, 4, {.return_candidates = true});
  std::vector<Stream> vocabulary = {{2, prompt_of(43, 4, v), {}}};
  vocabulary[0].sampling = crowd[2].sampling;
  run_together(with_candidates, vocabulary, steps, 4);
  EXPECT_EQ(vocabulary[0].tokens, crowd[2].tokens);
  // Every logit that draw took is lm_head_batch's f32 arithmetic, on tensor cores or not (the
  // same bits as without them), and within a few ulps of the single-sequence step's (the batch's
  // kernels are not the decode graph's: its logits may differ in the last bits, x in F16 would
  // move them ~100x more).
  bitnet::BitNetBatchDecoder plain(ctx(), model, 4, {.tensor_core_head = false, .return_candidates = true});
  std::vector<Stream> plain_drawn = {{2, prompt_of(43, 4, v), {}}};
  plain_drawn[0].sampling = crowd[2].sampling;
  run_together(plain, plain_drawn, steps, 4);
  const Stream& drawn = vocabulary[0];
  ASSERT_EQ(drawn.logits.size(), size_t(steps - 1));
  ASSERT_EQ(plain_drawn[0].logits.size(), size_t(steps - 1));
  reference.prefill(drawn.prompt, 0);
  for (uint32_t i = 0; i + 1 < steps; ++i) {
    reference.step(drawn.tokens[i], uint32_t(drawn.prompt.size()) + i);
    const auto want = reference.logits();
    ASSERT_EQ(drawn.logits[i].size(), want.size()) << "step " << i;
    for (size_t r = 0; r < want.size(); ++r) {
      ASSERT_EQ(std::bit_cast<uint32_t>(drawn.logits[i][r]), std::bit_cast<uint32_t>(plain_drawn[0].logits[i][r]))
          << "step " << i << " row " << r;
      ASSERT_NEAR(drawn.logits[i][r], want[r], 2e-5f) << "step " << i << " row " << r;
    }
  }
  bitnet::BitNetBatchDecoder full(ctx(), model, 4, {.tensor_core_head = false, .pruned_head = false});
  std::vector<Stream> again = {{1, prompt_of(40, 6, v), {}}};
  again[0].sampling = streams[0].sampling;
  run_together(full, again, steps, 4);
  EXPECT_EQ(again[0].tokens, streams[0].tokens) << "the full head's top-k";
}

// Pipelined steps (submit() before the step before is collected): each stream's next entry takes
// its token from its output in the step submitted before (Entry::previous), which the host has
// not read yet. The tokens are decode()'s, for greedy, top-k and whole-vocabulary draws, while a
// stream leaves (its last output is then never fed on) and another joins with its prefill's
// token; the steps are collected in order. Out of order, too many at once, or a `previous` that
// names no output: refused.
TEST_F(BatchDecoder, PipelinedStepsGiveDecodesTokens) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 16;
  bitnet::BitNetModel model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 4);
  const uint32_t v = config.vocab_size, steps = 12;
  auto streams_of = [&] {
    std::vector<Stream> s = {{0, prompt_of(50, 5, v), {}}, {1, prompt_of(51, 3, v), {}}, {3, prompt_of(52, 7, v), {}},
                             {2, prompt_of(53, 4, v), {}}};
    s[1].sampling = {0.9f, 8, 0.95f, 0.0f, 21};
    s[2].sampling = {1.2f, 0, 1.0f, 0.0f, 22};
    return s;
  };
  // Synchronous: the first three together, the fourth alone.
  std::vector<Stream> want = streams_of();
  std::vector<Stream> first_three(want.begin(), want.begin() + 3), fourth = {want[3]};
  run_together(dec, first_three, steps);
  run_together(dec, fourth, steps);
  want = {first_three[0], first_three[1], first_three[2], fourth[0]};
  // Pipelined: stream 1 leaves after 6 tokens; stream 3 joins once the first step is in flight.
  std::vector<Stream> got = streams_of();
  std::vector<size_t> stop_at = {steps, 6, steps, steps};
  for (size_t j = 0; j < 3; ++j) got[j].tokens = {dec.prefill(got[j].slot, got[j].prompt, 0, got[j].sampling).token};
  std::deque<std::pair<uint64_t, std::vector<size_t>>> pending;  // ticket, stream of each entry
  std::vector<int32_t> fed_from(4, -1);  // each stream's entry in the step submitted last, or -1
  std::vector<uint32_t> submitted(4, 0);  // tokens each stream has in submitted steps
  bool joined = false;
  auto collect_one = [&] {
    const auto outs = dec.collect(pending.front().first);
    const auto owners = pending.front().second;
    pending.pop_front();
    ASSERT_EQ(outs.size(), owners.size());
    for (size_t i = 0; i < owners.size(); ++i) got[owners[i]].tokens.push_back(outs[i].token);
  };
  for (;;) {
    std::vector<models::BatchDecoder::Entry> batch;
    std::vector<size_t> owners;
    std::vector<int32_t> fed_next(4, -1);
    for (size_t j = 0; j < 4; ++j) {
      Stream& s = got[j];
      if (s.tokens.empty() || 1 + submitted[j] >= stop_at[j]) continue;  // not started, or enough in flight
      models::BatchDecoder::Entry e{s.slot, 0, uint32_t(s.prompt.size() + submitted[j]), s.sampling};
      if (fed_from[j] >= 0) e.previous = fed_from[j];
      else e.token = s.tokens.back();
      fed_next[j] = int32_t(batch.size());
      batch.push_back(e), owners.push_back(j), ++submitted[j];
    }
    if (batch.empty() && pending.empty()) break;
    if (!batch.empty()) {
      if (pending.size() == models::BatchDecoder::kMaxSubmitted) collect_one();
      pending.emplace_back(dec.submit(batch), owners);
    }
    fed_from = fed_next;
    if (!joined) {  // the fourth prefills while the first step is in flight
      got[3].tokens = {dec.prefill(got[3].slot, got[3].prompt, 0).token};
      joined = true;
    }
    if (batch.empty() || pending.size() == models::BatchDecoder::kMaxSubmitted) collect_one();
  }
  for (size_t j = 0; j < 4; ++j) {
    ASSERT_EQ(want[j].tokens.size(), steps);
    const std::vector<int32_t> expected(want[j].tokens.begin(), want[j].tokens.begin() + stop_at[j]);
    EXPECT_EQ(got[j].tokens, expected) << "stream " << j;
  }
  // Refused: a third step in flight, collecting out of order, a `previous` without an output.
  const std::vector<models::BatchDecoder::Entry> one = {{0, 1, 20}};
  const uint64_t a = dec.submit(one), b = dec.submit(one);
  EXPECT_THROW(dec.submit(one), std::logic_error);
  EXPECT_THROW(dec.collect(b), std::logic_error);
  dec.collect(a), dec.collect(b);
  models::BatchDecoder::Entry fed{0, 0, 21};
  fed.previous = 1;
  try {
    dec.submit(std::vector<models::BatchDecoder::Entry>{fed});
    ADD_FAILURE() << "a previous entry past the step before";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has 1 entries"), std::string::npos) << e.what();
  }
  dec.submit(std::vector<models::BatchDecoder::Entry>{{0, 1, 20}, {0, 2, 21}});  // a run: entry 0 has no output
  fed.previous = 0;
  try {
    dec.submit(std::vector<models::BatchDecoder::Entry>{fed});
    ADD_FAILURE() << "a previous entry without an output";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has no output"), std::string::npos) << e.what();
  }
}

TEST_F(BatchDecoder, BadStepsAreRefusedNamingTheProblem) {
  const auto file = models::GgufFile::open(dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::BitNetModel model(ctx(), file, config);
  bitnet::BitNetBatchDecoder dec(ctx(), model, 2);
  auto message = [&](std::vector<models::BatchDecoder::Entry> batch) {
    try {
      dec.decode(batch);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({{0, 1, 0}, {0, 2, 0}}).find("slot 0 at position 0 after position 0"), std::string::npos);
  EXPECT_NE(message({{0, 1, 3}, {1, 1, 0}, {0, 2, 5}}).find("a run of consecutive positions"), std::string::npos);
  EXPECT_NE(message({{2, 1, 0}}).find("slot 2 of a 2-slot decoder"), std::string::npos);
  EXPECT_NE(message({{0, int32_t(config.vocab_size), 0}}).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(message({{0, 1, config.context_length}}).find("past the context length"), std::string::npos);
  EXPECT_NE(message({}).find("1 to 66 entries"), std::string::npos);
  EXPECT_NE(message(std::vector<models::BatchDecoder::Entry>(67, {0, 1, 0})).find("1 to 66 entries"), std::string::npos);
  bitnet::BitNetBatchDecoder no_runs(ctx(), model, 2, {.prompt_lanes = 0});
  try {
    no_runs.decode(std::vector<models::BatchDecoder::Entry>{{1, 1, 0}, {1, 2, 1}});
    ADD_FAILURE() << "a run in a decoder without prompt lanes";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("slot 1 twice"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dec.prefill(0, std::vector<int32_t>(config.context_length + 1, 1), 0), std::out_of_range);
  // A greedy-only model (no candidates) cannot sample.
  models::BatchDecoder::Entry hot{0, 1, 0, {0.7f, 40, 0.95f, 0.0f, 1}};
  EXPECT_NE(message({hot}).find("greedy-only"), std::string::npos);
  hot.sampling.top_p = 0;
  EXPECT_NE(message({hot}).find("top-p must be in (0, 1]"), std::string::npos);
}

}  // namespace
}  // namespace bdsl::test
