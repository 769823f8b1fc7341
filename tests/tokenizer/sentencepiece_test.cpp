// SentencePiece (`tokenizer.ggml.model = "llama"`) on a hand-made vocabulary, each expected
// result worked out by hand from llama.cpp's algorithm (models/tokenizer/spm.h): merges by score,
// the leftmost on a tie, a space in front of text that starts the prompt or follows a special
// token, byte tokens for characters outside the vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "models/formats/gguf.h"
#include "models/formats/gguf_writer.h"
#include "models/tokenizer/tokenizer.h"

namespace bdsl::models {
namespace {

using Ids = std::vector<int32_t>;
const std::string kSpace = "\xE2\x96\x81";  // "▁"

// <unk>, <s>, </s>, the 256 byte tokens, then `pieces` (text with "_" for "▁", score) in order.
TokenizerSpec spm_spec(const std::vector<std::pair<std::string, float>>& pieces, bool add_space_prefix = true) {
  TokenizerSpec s;
  s.model = "llama";
  s.add_space_prefix = add_space_prefix;
  auto add = [&](std::string text, TokenType type, float score) {
    s.tokens.push_back(std::move(text));
    s.token_types.push_back(static_cast<int32_t>(type));
    s.scores.push_back(score);
  };
  add("<unk>", TokenType::Unknown, 0);
  add("<s>", TokenType::Control, 0);
  add("</s>", TokenType::Control, 0);
  for (int b = 0; b < 256; ++b) {
    char name[7];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, TokenType::Byte, 0);
  }
  for (const auto& [text, score] : pieces) {
    std::string t;
    for (char c : text) t += c == '_' ? kSpace : std::string(1, c);
    add(t, TokenType::Normal, score);
  }
  s.bos_id = 1;
  s.eos_id = 2;
  return s;
}

constexpr int32_t kFirstPiece = 259;

const std::vector<std::pair<std::string, float>> kHelloWorld = {
    {"_", -20}, {"h", -20}, {"e", -20}, {"l", -20}, {"o", -20}, {"w", -20}, {"r", -20}, {"d", -20},
    {"_h", -1}, {"ll", -2}, {"_w", -3}, {"or", -4}, {"ld", -5}, {"_he", -6}, {"llo", -7}, {"_hello", -8},
    {"_wor", -9}, {"_world", -10}};
int32_t piece(const std::string& text) {  // id of a kHelloWorld piece
  for (size_t i = 0; i < kHelloWorld.size(); ++i)
    if (kHelloWorld[i].first == text) return kFirstPiece + int32_t(i);
  throw std::logic_error(text);
}

TEST(SentencePiece, MergesTheHighestScoredPairsIntoWholeWords) {
  const Tokenizer t(spm_spec(kHelloWorld));
  // "▁hello▁world": ▁h, ll, ▁w, or, ld, then ▁he, llo, ▁hello, ▁wor, ▁world.
  EXPECT_EQ(t.encode("hello world", false), (Ids{piece("_hello"), piece("_world")}));
  EXPECT_EQ(t.encode("hello world", true), (Ids{1, piece("_hello"), piece("_world")}));
  EXPECT_EQ(t.decode(t.encode("hello world", false)), " hello world");
  EXPECT_EQ(t.encode("", true), (Ids{1}));
  EXPECT_EQ(t.encode("", false), (Ids{}));
}

TEST(SentencePiece, HigherScoreFirstAndTheLeftmostOnATie) {
  auto abc = [](float ab, float bc) {
    const Tokenizer t(spm_spec({{"a", -20}, {"b", -20}, {"c", -20}, {"ab", ab}, {"bc", bc}}, false));
    return t.encode("abc", false);
  };
  const int32_t a = kFirstPiece, b = a + 1, c = a + 2, ab = a + 3, bc = a + 4;
  EXPECT_EQ(abc(-1, -0.5f), (Ids{a, bc}));
  EXPECT_EQ(abc(-0.5f, -1), (Ids{ab, c}));
  EXPECT_EQ(abc(-1, -1), (Ids{ab, c}));
  (void)b;
}

TEST(SentencePiece, CharactersOutsideTheVocabularyGoOutAsBytes) {
  const Tokenizer t(spm_spec(kHelloWorld));
  // "▁hé": ▁h merges; é (C3 A9) is no token: its two bytes.
  EXPECT_EQ(t.encode("hé", false), (Ids{piece("_h"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t.decode(t.encode("hé", false)), " hé");
  EXPECT_EQ(t.decode(t.encode("\x01 wow\xff", false)), " \x01 wow\xff");  // any bytes come back
}

TEST(SentencePiece, ASpacePrefixStartsThePromptAndFollowsSpecialTokens) {
  const Tokenizer t(spm_spec(kHelloWorld));
  EXPECT_EQ(t.encode("<s>hello</s>", false), (Ids{1, piece("_hello"), 2}));
  // Unparsed: "▁<s>hello</s>", its "<" a byte (no piece holds it).
  EXPECT_EQ(t.encode("<s>hello</s>", false, false)[1], 3 + '<');
  const Tokenizer bare(spm_spec(kHelloWorld, false));
  // "hello" without the prefix: ll, then llo; "he" is no token.
  EXPECT_EQ(bare.encode("hello", false), (Ids{piece("h"), piece("e"), piece("llo")}));
}

TEST(SentencePiece, ReadFromGgufKeysAndBadVocabulariesRefused) {
  const TokenizerSpec spec = spm_spec(kHelloWorld, false);
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", spec.tokens);
  w.add_array<int32_t>("tokenizer.ggml.token_type", spec.token_types);
  w.add_array<float>("tokenizer.ggml.scores", spec.scores);
  w.add_bool("tokenizer.ggml.add_space_prefix", false);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  const auto bytes = w.to_bytes();
  const Tokenizer t = Tokenizer::from_gguf(GgufFile::parse(bytes));
  EXPECT_EQ(t.encode("hello", true), (Ids{1, piece("h"), piece("e"), piece("llo")}));

  auto refused = [](TokenizerSpec s, const std::string& says) {
    try {
      Tokenizer bad(s);
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  TokenizerSpec no_byte = spec;
  no_byte.tokens[3 + 0x80] = "x80";  // no token "<0x80>" and none of the byte itself
  no_byte.token_types[3 + 0x80] = static_cast<int32_t>(TokenType::Normal);
  refused(no_byte, "no byte token <0x80>");
  for (const char* bad : {"<0xZZ>", "<0x-1>", "<0x 5>", "<0x+F>", "<0x1>"}) {
    TokenizerSpec bad_byte = spec;
    bad_byte.tokens[3] = bad;
    refused(bad_byte, std::string("'") + bad + "' is a byte token");
  }
  TokenizerSpec nan_score = spec;
  nan_score.scores[270] = std::nanf("");
  refused(nan_score, "tokenizer.ggml.scores[270] is not a finite number");
  TokenizerSpec short_scores = spec;
  short_scores.scores.pop_back();
  refused(short_scores, "tokenizer.ggml.scores has");
  TokenizerSpec other = spec;
  other.model = "bert";
  refused(other, "tokenizer.ggml.model is 'bert'");
}

}  // namespace
}  // namespace bdsl::models
