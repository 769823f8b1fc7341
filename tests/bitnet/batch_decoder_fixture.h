// The batch decoder tests' fixture (the tiny models, written once a suite) and what they share:
// streams, and ways to run them through a BitNetBatchDecoder.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "device_test.h"
#include "temp_dir.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/batch_decoder.h"
#include "models/bitnet/bitnet_model.h"

namespace bdsl::test {
namespace fs = std::filesystem;

class BatchDecoder : public DeviceTest {
 protected:
  static void SetUpTestSuite() {
    dir_.emplace("batch");
    golden::write_synthetic_model(golden::synthetic_preset("tiny"), *dir_ / "tiny.gguf");
    auto llama = golden::synthetic_preset("tiny");
    llama.architecture = "llama";
    golden::write_synthetic_model(llama, *dir_ / "tiny-llama.gguf");
  }
  static void TearDownTestSuite() { dir_.reset(); }
  inline static std::optional<TempDir> dir_;
};

inline std::vector<int32_t> prompt_of(uint32_t seed, uint32_t length, uint32_t vocab) {
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

// Decodes every stream (its prompt in its slot, its first token in tokens) together until each
// has `steps` tokens.
inline void decode_together(bitnet::BitNetBatchDecoder& dec, std::vector<Stream>& streams, uint32_t steps) {
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

// `prompt` through prefill() into `slot` in chunks of `chunk`: the last chunk's output.
inline models::StepOutput prefill_in_chunks(models::BatchDecoder& dec, uint32_t slot, std::span<const int32_t> prompt,
                                            uint32_t chunk, const models::SamplerOptions& sampling = {},
                                            int32_t logprobs = -1) {
  models::StepOutput out;
  for (uint32_t first = 0; first < prompt.size(); first += chunk) {
    const uint32_t n = std::min<uint32_t>(chunk, uint32_t(prompt.size()) - first);
    out = dec.prefill(slot, prompt.subspan(first, n), first, sampling, logprobs);
  }
  return out;
}

// Prefills every stream (in chunks of `chunk`), then decodes them together for `steps` steps.
inline void run_together(bitnet::BitNetBatchDecoder& dec, std::vector<Stream>& streams, uint32_t steps, uint32_t chunk = 512) {
  for (auto& s : streams) s.tokens = {prefill_in_chunks(dec, s.slot, s.prompt, chunk, s.sampling).token};
  decode_together(dec, streams, steps);
}

// The same tokens, and every step's 8 candidate logits the same bits.
inline void expect_same_candidates(const Stream& got, const Stream& want, const std::string& what) {
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
inline void run_in_steps(bitnet::BitNetBatchDecoder& dec, std::vector<Stream>& streams, uint32_t steps, uint32_t per_step) {
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

}  // namespace bdsl::test
