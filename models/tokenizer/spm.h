// SentencePiece as llama.cpp runs it for `tokenizer.ggml.model = "llama"` (LLaMA 1/2, 1bitLLM's
// BitNet): one fragment of text (spaces already written as U+2581 "▁") is split into UTF-8
// characters, then the adjacent pair whose joined text is a token with the highest score is
// merged (the leftmost on a tie), again and again until no pair is a token. A piece left that
// is not a token (a character outside the vocabulary) goes out as one byte token per byte.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace bdsl::models {

struct SpmVocabulary {
  std::function<std::optional<int32_t>(std::string_view)> token;  // a token whose text this is
  std::span<const float> scores;                                  // by id; empty: every score 0
  std::function<int32_t(unsigned char)> byte_token;               // <0xXX>
};

void spm_tokenize(std::string_view text, const SpmVocabulary& vocab, std::vector<int32_t>& out);

// " " -> "▁", as llama.cpp's llama_escape_whitespace; and back ("▁" -> " ", llama_unescape_whitespace).
std::string spm_escape_spaces(std::string_view text);
std::string spm_unescape_spaces(std::string_view text);

}  // namespace bdsl::models
