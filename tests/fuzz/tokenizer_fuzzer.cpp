// libFuzzer target for the tokenizer (prompt text comes from users and HTTP bodies): arbitrary
// bytes, not only UTF-8, are encoded with a real byte-level BPE vocabulary (the synthetic one
// test models use: byte tokens, trained merges, LLaMA-3's special tokens). encode must not
// crash, every id must be in the vocabulary, and decode(encode(text)) must give the text back
// byte for byte, with special tokens matched and with them tokenized as plain text. The same text
// through a SentencePiece vocabulary (byte fallback, scores).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "golden/synthetic_vocab.h"
#include "models/tokenizer/tokenizer.h"

namespace {

const bdsl::models::Tokenizer& tokenizer() {
  static const bdsl::models::Tokenizer t(bdsl::golden::make_synthetic_vocab(2048));
  return t;
}

// A SentencePiece vocabulary (tokenizer.ggml.model = "llama"): the 256 byte tokens, <s>, </s>,
// and pieces of a few words with their scores.
const bdsl::models::Tokenizer& sentencepiece() {
  static const bdsl::models::Tokenizer t([] {
    bdsl::models::TokenizerSpec s;
    s.model = "llama";
    auto add = [&](std::string text, bdsl::models::TokenType type, float score) {
      s.tokens.push_back(std::move(text));
      s.token_types.push_back(static_cast<int32_t>(type));
      s.scores.push_back(score);
    };
    add("<unk>", bdsl::models::TokenType::Unknown, 0);
    add("<s>", bdsl::models::TokenType::Control, 0);
    add("</s>", bdsl::models::TokenType::Control, 0);
    for (int b = 0; b < 256; ++b) {
      char name[7];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      add(name, bdsl::models::TokenType::Byte, 0);
    }
    const std::string space = "\xE2\x96\x81";
    float score = -1;
    for (const char* piece : {"a", "b", "e", "h", "l", "o", "t", "th", "he", "the", "ll", "llo", "el", "hel", "hello"}) {
      add(piece, bdsl::models::TokenType::Normal, score);
      add(space + piece, bdsl::models::TokenType::Normal, score - 0.5f);
      score -= 1;
    }
    add(space, bdsl::models::TokenType::Normal, -100);
    s.bos_id = 1;
    s.eos_id = 2;
    return s;
  }());
  return t;
}

// Whether `text` is whole UTF-8 characters by the lead byte's length (as SentencePiece splits it).
bool whole_characters(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    const auto lead = static_cast<unsigned char>(text[at]);
    const std::size_t n = lead < 0x80 ? 1 : lead < 0xC0 ? 0 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 0;
    if (n == 0 || at + n > text.size()) return false;
    for (std::size_t i = 1; i < n; ++i)
      if ((static_cast<unsigned char>(text[at + i]) & 0xC0) != 0x80) return false;
    at += n;
  }
  return true;
}

// SentencePiece: every id in the vocabulary, and, for whole UTF-8 characters without "▁" (which
// decodes as a space, as in llama.cpp), the text back after the space prefix. (A broken character
// may swallow the bytes of the next "▁" as llama.cpp's split does: they then come back as bytes.)
void sentencepiece_round_trip(std::string_view text) {
  const auto& t = sentencepiece();
  const auto ids = t.encode(text, /*add_bos=*/false, /*parse_special=*/false);
  for (int32_t id : ids)
    if (id < 0 || id >= t.vocab_size()) std::abort();
  if (text.find("\xE2\x96\x81") == std::string_view::npos && !text.empty() && whole_characters(text) &&
      t.decode(ids) != " " + std::string(text))
    std::abort();
  t.encode(text, /*add_bos=*/true, /*parse_special=*/true);
}

void round_trip(std::string_view text, bool parse_special) {
  const auto& t = tokenizer();
  const auto ids = t.encode(text, /*add_bos=*/false, parse_special);
  for (int32_t id : ids)
    if (id < 0 || id >= t.vocab_size()) std::abort();
  if (t.decode(ids, /*render_special=*/true) != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  round_trip(text, true);
  round_trip(text, false);
  sentencepiece_round_trip(text);
  // BOS is added once, in front, whatever the text starts with.
  const auto& t = tokenizer();
  const auto with_bos = t.encode(text, /*add_bos=*/true);
  if (with_bos.empty() || with_bos.front() != t.bos_id()) std::abort();
  return 0;
}
