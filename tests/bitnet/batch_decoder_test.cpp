// Many sequences in one decode step (BitNetBatchDecoder) on the tiny model: a sequence's greedy
// tokens are the same alone or beside others, in any slot, after the slot served another
// sequence, with its prompt prefilled or run in the steps however split, in every bucket and
// layout; and a bad step is refused, naming what is wrong.
#include <set>

#include "ops/ternary/ternary_matmul_coopmat.h"
#include "batch_decoder_fixture.h"

namespace bdsl::test {
namespace {

TEST_F(BatchDecoder, GreedyTokensAreTheSameAloneOrBesideOthersInAnySlot) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
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
  // Buckets of every size up to 8 lanes, whose projections normalize inside their workgroups
  // (ops/tuning.h's step_norm_fused_max_tokens) as one lane does; powers of two past them.
  EXPECT_EQ(dec.bucket_for(3), 3u);
  EXPECT_EQ(dec.bucket_for(8), 8u);
  EXPECT_EQ(dec.bucket_for(9), 16u);
  // Every op is one dispatch for all the lanes, whatever the bucket.
  EXPECT_GT(dec.step_stats(1).dispatches, 0u);
  EXPECT_EQ(dec.step_stats(4).dispatches, dec.step_stats(1).dispatches);
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
  expect_greedy_tokens_of_the_single_sequence_model(ctx(), *dir_ / "tiny.gguf", 4);
}

// `llama`'s graph (no sub-norms, SiLU, reordered q and k rows) in the batch: the same. The tiny
// random `llama` settles on one token after a few steps (without sub-norms its FFN output swamps
// the residual stream); its logits are checked against decode by Prefill.MatchesDecodeForEveryArchitecture
// (the prompt path's kernels are the batch's).
TEST_F(BatchDecoder, GreedyTokensAreTheSingleSequenceModelsForLlama) {
  expect_greedy_tokens_of_the_single_sequence_model(ctx(), *dir_ / "tiny-llama.gguf", 1);
}

// Stronger than the tokens: the candidates' logits are the same bits in a bucket of one lane and
// in one of three streams (three lanes, or four where the norms are dispatches), and with the projections fused (QKV in one dispatch, relu(gate)^2 * up in
// gate/up's epilogue) or separate (one dispatch a tensor, the product formed by the quantizer),
// each bucket with its own token tile.
TEST_F(BatchDecoder, CandidateLogitsAreTheSameBitsInEveryBucketAndLayout) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
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
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
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

// Small buckets normalize and quantize each token inside the projections' workgroups (a
// workgroup a token, attn_output merging attention's chunks); the same steps with the norms as
// dispatches of their own give the same bits, in buckets of 1, 2 and 4, with tiles of one, two
// and four tokens a workgroup (the tile's tokens normalized side by side).
TEST_F(BatchDecoder, NormsInsideTheProjectionsGiveTheSameBits) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 8;
  bitnet::BitNetModel apart_model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder apart(ctx(), apart_model, 4, {.norm_fused_max_tokens = -1, .return_candidates = true});
  const uint32_t v = config.vocab_size, steps = 5;
  auto streams_of = [&](uint32_t n) {
    std::vector<Stream> s;
    for (uint32_t i = 0; i < n; ++i) s.push_back({i, prompt_of(20 + i, 4 + 3 * i, v), {}, {}});
    return s;
  };
  std::vector<std::vector<Stream>> expected;
  for (uint32_t streams : {1u, 2u, 3u}) {
    expected.push_back(streams_of(streams));
    run_in_steps(apart, expected.back(), steps, 1);  // one prompt token a step: every step in a small bucket
  }
  for (uint32_t tile : {1u, 2u, 4u}) {
    bitnet::BitNetModel fused_model(ctx(), file, config, o);
    bitnet::BitNetBatchDecoder fused(ctx(), fused_model, 4,
                                     {.norm_fused_max_tokens = 4, .step_norm_tile = tile, .return_candidates = true});
    for (const auto& b : expected) {
      std::vector<Stream> a = streams_of(uint32_t(b.size()));
      run_in_steps(fused, a, steps, 1);
      for (size_t i = 0; i < b.size(); ++i) {
        ASSERT_EQ(a[i].top_logits.size(), steps);
        expect_same_candidates(a[i], b[i], "tile " + std::to_string(tile) + ", " + std::to_string(b.size()) + " streams, stream " + std::to_string(i));
      }
    }
    for (uint32_t streams : {1u, 2u, 3u}) {
      EXPECT_EQ(fused.bucket_for(streams), streams) << "a bucket of every size where the norms are inside";
      EXPECT_EQ(fused.step_stats(fused.bucket_for(streams)).dispatches + 4 * config.n_layers,
                apart.step_stats(apart.bucket_for(streams)).dispatches)
          << "tile " << tile << ", " << streams << " streams: the norms are not dispatches";
    }
  }
}

// Tensor-core steps whose projections split their reduction between workgroups
// (BatchOptions::coop_blocks_per_split; the tiny model's 4 and 12 blocks in up to 4 and 12 shares):
// the same bits as unsplit. Only where the device has tensor cores: elsewhere these steps run
// the subgroup matmul, which never splits.
TEST_F(BatchDecoder, SplitReductionsGiveTheSameBits) {
  if (!ops::ternary_matmul_coopmat_shape(ops::OpTarget::from(ctx().info())))
    GTEST_SKIP() << "no tensor cores: the steps never split";
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
  const auto config = models::BitNetConfig::from_gguf(file);
  bitnet::ModelOptions o;
  o.top_k = 8;
  bitnet::BitNetModel whole_model(ctx(), file, config, o);
  bitnet::BitNetBatchDecoder whole(ctx(), whole_model, 4,
                                   {.subgroup_max_tokens = 1, .coop_blocks_per_split = 0, .return_candidates = true});
  const uint32_t v = config.vocab_size, steps = 4;
  auto streams_of = [&](uint32_t n) {
    std::vector<Stream> s;
    for (uint32_t i = 0; i < n; ++i) s.push_back({i, prompt_of(30 + i, 5 + 2 * i, v), {}, {}});
    return s;
  };
  std::vector<std::vector<Stream>> expected;
  for (uint32_t streams : {2u, 4u}) {
    expected.push_back(streams_of(streams));
    run_in_steps(whole, expected.back(), steps, 3);
  }
  for (int per : {1, 2}) {
    bitnet::BitNetModel split_model(ctx(), file, config, o);
    bitnet::BitNetBatchDecoder split(ctx(), split_model, 4,
                                     {.subgroup_max_tokens = 1, .coop_blocks_per_split = per, .return_candidates = true});
    for (const auto& b : expected) {
      std::vector<Stream> a = streams_of(uint32_t(b.size()));
      run_in_steps(split, a, steps, 3);
      for (size_t i = 0; i < b.size(); ++i)
        expect_same_candidates(a[i], b[i], std::to_string(per) + " blocks a split, " + std::to_string(b.size()) +
                                               " streams, stream " + std::to_string(i));
    }
  }
}

// Attention leaves its chunks' combine to the consumer (BatchOptions::defer_attention_combine):
// attn_output's prologue in the one-lane bucket, which normalizes inside the projections, and
// attn_sub_norm's quantize (ops::attention_output_quantize) where the norms are dispatches. The
// same bits as attention combining them itself, at positions of one to four chunks, alone or
// beside another (two chunks a workgroup there, where the quantize merges).
TEST_F(BatchDecoder, AttentionCombinedByItsConsumerGivesTheSameBits) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
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
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
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
    const uint32_t three = in.bucket_for(3);
    EXPECT_EQ(in.step_stats(three).dispatches + config.n_layers, apart.step_stats(three).dispatches) << "RoPE is not a dispatch";
  }
}

// Attention's chunks taken several to a workgroup in the larger buckets, and the smaller ones' KV
// heads split over more workgroups: the same bits as a workgroup a chunk everywhere with one
// split. One position a row group per pass, so the tiny model's short sequences span all 4
// chunks; three streams together (bucket 3), then one alone (bucket 1).
TEST_F(BatchDecoder, AttentionWorkgroupLayoutsGiveTheSameBits) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
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


TEST_F(BatchDecoder, BadStepsAreRefusedNamingTheProblem) {
  const auto file = models::GgufFile::open(*dir_ / "tiny.gguf");
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
