// The tokenizer GGUF files describe, in one of two forms:
// - `tokenizer.ggml.model = "gpt2"` (GPT-2, LLaMA-3, BitNet b1.58, Falcon3): byte-level BPE. The
//   vocabulary is text in GPT-2's byte-level alphabet, merges are ranked by position, and the text
//   is split by the LLaMA-3 pre-tokenizer and merged word by word.
// - `tokenizer.ggml.model = "llama"` (LLaMA 1/2's SentencePiece, 1bitLLM's BitNet): spaces as "▁",
//   a space in front of each stretch of text after a special token (add_space_prefix), pieces
//   merged by token score (spm.h), characters outside the vocabulary as <0xXX> byte tokens.
// In both, control and user-defined tokens are matched as whole strings first.
//
// Internally every token is kept as the raw bytes it stands for, so encode works on bytes and
// decode is exact for any byte sequence (a token may hold half of a UTF-8 character).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/tokenizer/bpe.h"
#include "models/tokenizer/chat_template.h"

namespace bdsl::models {

class GgufFile;

// The values of `tokenizer.ggml.token_type`, as llama.cpp defines them.
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// Everything the tokenizer.ggml.* keys say, in memory: what a GGUF gives, or a test builds.
struct TokenizerSpec {
  std::string model = "gpt2";           // tokenizer.ggml.model: "gpt2" or "llama"
  std::optional<std::string> pre;       // tokenizer.ggml.pre; missing means "llama-bpe"
  std::vector<std::string> tokens;      // tokenizer.ggml.tokens, byte-level text
  std::vector<int32_t> token_types;     // tokenizer.ggml.token_type; empty = all Normal
  std::vector<std::string> merges;      // tokenizer.ggml.merges, "left right" (gpt2)
  std::vector<float> scores;            // tokenizer.ggml.scores (llama); empty = all 0
  bool add_space_prefix = true;         // tokenizer.ggml.add_space_prefix (llama)
  int32_t bos_id = -1;                  // tokenizer.ggml.bos_token_id; -1 = none
  int32_t eos_id = -1;                  // tokenizer.ggml.eos_token_id; -1 = none
  std::optional<int32_t> eot_id;        // tokenizer.ggml.eot_token_id; else the token "<|eot_id|>"
  ChatFormat chat_format = ChatFormat::BitNet;  // from tokenizer.chat_template or the architecture
};

class Tokenizer {
 public:
  // Validates the spec; throws std::runtime_error naming the key and what is wrong.
  explicit Tokenizer(const TokenizerSpec& spec);
  // Lookup tables hold views into the token strings: moving keeps them valid, copying would not.
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  Tokenizer(Tokenizer&&) = default;
  Tokenizer& operator=(Tokenizer&&) = default;

  // Reads the tokenizer.ggml.* keys (tokenizer_gguf.cpp).
  static Tokenizer from_gguf(const GgufFile& file);

  // `add_bos` prepends BOS unless the text already starts with it (a chat template that writes
  // "<|begin_of_text|>" must not get two). `parse_special` matches control and user-defined
  // tokens in the text; without it their text is tokenized like any other.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = true) const;

  // Concatenated bytes of the tokens. Control tokens (BOS, EOS, <|eot_id|>) are written as their
  // text when `render_special`, else skipped. Throws std::out_of_range for an id outside the vocab.
  std::string decode(std::span<const int32_t> ids, bool render_special = true) const;

  // The bytes one token stands for (control tokens: their text).
  std::string_view token_bytes(int32_t id) const;
  const std::string& token_text(int32_t id) const;  // as stored, byte-level alphabet
  TokenType token_type(int32_t id) const;
  std::optional<int32_t> find_token(std::string_view text) const;  // by stored text

  int32_t vocab_size() const { return static_cast<int32_t>(texts_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t eot_id() const { return eot_id_; }  // -1 if the vocabulary has none
  // EOS or end-of-turn: where generation stops.
  bool is_end_of_generation(int32_t id) const { return id >= 0 && (id == eos_id_ || id == eot_id_); }
  ChatFormat chat_format() const { return chat_format_; }
  // `messages` in the model's chat format with its own BOS and EOS text: encode it without add_bos.
  std::string chat_prompt(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

 private:
  struct SpecialToken {
    std::string_view text;
    int32_t id;
  };

  void load_texts_and_types(const TokenizerSpec& spec);  // both forms: texts_, types_, bytes_ sized
  void load_vocabulary();                                // byte-level BPE's bytes and lookups
  void load_merges(const std::vector<std::string>& merges);
  void load_special_ids(const TokenizerSpec& spec);
  void check_id(int32_t id) const;
  std::optional<SpecialToken> special_at(std::string_view text, std::size_t pos) const;
  void encode_plain(std::string_view text, std::vector<int32_t>& out,
                    std::unordered_map<std::string_view, std::vector<int32_t>>& cache) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void load_sentencepiece(const TokenizerSpec& spec);  // SentencePiece's bytes, lookups and scores
  void encode_sentencepiece(std::string_view fragment, bool after_special, std::vector<int32_t>& out) const;

  bool sentencepiece_ = false;            // tokenizer.ggml.model = "llama"
  bool add_space_prefix_ = true;
  std::vector<float> scores_;

  std::vector<std::string> texts_;        // as stored
  std::vector<std::string> bytes_;        // what each token stands for
  std::vector<TokenType> types_;
  std::unordered_map<std::string_view, int32_t> id_by_bytes_;  // ordinary tokens only
  std::unordered_map<std::string_view, int32_t> id_by_text_;
  int32_t byte_token_[256] = {};          // the single-byte token of each byte
  BpeMerges merges_;
  // Special tokens grouped by their first byte, longest first, so a scan only looks at the
  // candidates that can start at the current byte.
  std::vector<SpecialToken> specials_by_first_byte_[256];
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t eot_id_ = -1;
  ChatFormat chat_format_ = ChatFormat::BitNet;
};

}  // namespace bdsl::models
