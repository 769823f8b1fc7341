// Generation on any DecoderModel: feeds a prompt, then picks tokens (greedy or sampled) until EOS,
// a token limit or a full context, calling back with each one so the caller can stream it.
#pragma once
#include <algorithm>
#include <functional>
#include <span>
#include <vector>

#include "models/decoder_model.h"
#include "models/sampler.h"

namespace bdsl::models {

enum class StopReason { Limit, EndOfGeneration, ContextFull, Callback };
const char* to_string(StopReason r);

struct GenerateOptions {
  uint32_t max_new_tokens = 128;
  SamplerOptions sampling;            // temperature 0: greedy
  std::function<bool(int32_t)> is_end;        // e.g. Tokenizer::is_end_of_generation; may be empty
  bool keep_logits = false;                   // keep every step's logits (for --dump-logits)
  std::function<void(uint32_t)> after_prompt_token;  // called after prompt token i ran (dumps)
};

struct GenerationResult {
  std::vector<int32_t> tokens;                // generated, without the prompt
  StopReason reason = StopReason::Limit;
  double prompt_seconds = 0, generate_seconds = 0;
  uint32_t prompt_tokens = 0;
  // Of them, those the prompt pass ran (prompt_seconds is theirs): all but the last, which the
  // generating recording decodes, where the device chooses the first token too.
  uint32_t prompt_pass_tokens = 0;
  std::vector<std::vector<float>> logits;     // with keep_logits: one row per prompt position, then per step
};

class Generator {
 public:
  explicit Generator(DecoderModel& model) : model_(model) {}

  // Appends `prompt` after what the KV cache already holds (position `position()`), then generates.
  // `on_token` returns false to stop. Throws std::length_error when the prompt does not fit.
  GenerationResult generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                            const std::function<bool(int32_t)>& on_token = {});

  uint32_t position() const { return pos_; }  // tokens in the KV cache
  void reset() { pos_ = 0; }                  // forget the conversation (the cache is overwritten)
  // Keep only the first `pos` tokens of the cache (a conversation whose text was re-tokenized
  // differently from what was generated continues from where they still agree).
  void rewind(uint32_t pos) { pos_ = std::min(pos_, pos); }

 private:
  DecoderModel& model_;
  uint32_t pos_ = 0;
};

}  // namespace bdsl::models
