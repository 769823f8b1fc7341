#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/tokenizer/pretokenizer.h"
#include "models/tokenizer/unicode_classes.h"

namespace bdsl::models {
namespace {

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> out;
  for (auto piece : split_llama3(text)) out.emplace_back(piece);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Llama3PreTokenizer, WordsTakeTheirLeadingSpace) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("(hello"), (Pieces{"(hello"}));
}

TEST(Llama3PreTokenizer, ContractionsAreCaseInsensitive) {
  EXPECT_EQ(split("I'm we'RE they'll it's he'd"),
            (Pieces{"I", "'m", " we", "'RE", " they", "'ll", " it", "'s", " he", "'d"}));
  // 's matches even when letters follow: the regex alternative comes first.
  EXPECT_EQ(split("'sun"), (Pieces{"'s", "un"}));
  EXPECT_EQ(split("'x"), (Pieces{"'x"}));
}

TEST(Llama3PreTokenizer, NumbersComeInGroupsOfAtMostThree) {
  EXPECT_EQ(split("1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("in 2024"), (Pieces{"in", " ", "202", "4"}));
  EXPECT_EQ(split("12,500"), (Pieces{"12", ",", "500"}));
}

TEST(Llama3PreTokenizer, PunctuationTakesOneSpaceAndTrailingNewlines) {
  EXPECT_EQ(split("a !!\n\nb"), (Pieces{"a", " !!\n\n", "b"}));
  EXPECT_EQ(split("x...y"), (Pieces{"x", "...", "y"}));
}

TEST(Llama3PreTokenizer, SpacesLeaveTheLastOneToTheNextWord) {
  EXPECT_EQ(split("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split("a   "), (Pieces{"a", "   "}));
  EXPECT_EQ(split("   1"), (Pieces{"  ", " ", "1"}));
  EXPECT_EQ(split("\t\tx"), (Pieces{"\t", "\tx"}));
}

TEST(Llama3PreTokenizer, NewlinesEndAWhitespaceRun) {
  EXPECT_EQ(split("a\n\n  b"), (Pieces{"a", "\n\n", " ", " b"}));
  EXPECT_EQ(split("a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(split("\r\n"), (Pieces{"\r\n"}));
}

TEST(Llama3PreTokenizer, UnicodeLettersAndNumbers) {
  EXPECT_EQ(split("café naïve"), (Pieces{"café", " naïve"}));
  EXPECT_EQ(split("日本語テキスト"), (Pieces{"日本語テキスト"}));
  EXPECT_EQ(split("Привет, мир"), (Pieces{"Привет", ",", " мир"}));
  EXPECT_EQ(split("٣٤٥٦"), (Pieces{"٣٤٥", "٦"}));   // Arabic-Indic digits are \p{N}
  EXPECT_EQ(split("x²"), (Pieces{"x", "²"}));        // superscript two is \p{N} (No)
  EXPECT_EQ(split("hi 🙂!"), (Pieces{"hi", " 🙂!"}));  // emoji are neither L nor N
}

TEST(Llama3PreTokenizer, InvalidUtf8BytesArePreservedAsPunctuation) {
  const std::string text = "ab\xff\xfe cd\xc3";
  std::string joined;
  for (auto p : split_llama3(text)) joined += p;
  EXPECT_EQ(joined, text);
  EXPECT_EQ(split("ab\xff\xfe"), (Pieces{"ab", "\xff\xfe"}));
}

TEST(UnicodeClasses, RangesAnswerKnownCodepoints) {
  EXPECT_TRUE(is_letter(U'a'));
  EXPECT_TRUE(is_letter(U'ß'));
  EXPECT_TRUE(is_letter(U'中'));
  EXPECT_FALSE(is_letter(U'1'));
  EXPECT_FALSE(is_letter(U'🙂'));
  EXPECT_TRUE(is_number(U'७'));  // Devanagari seven
  EXPECT_TRUE(is_number(U'Ⅻ'));   // Roman numeral (Nl)
  EXPECT_FALSE(is_number(U'x'));
  EXPECT_TRUE(is_whitespace(U'\u3000'));
  EXPECT_TRUE(is_whitespace(U'\u00A0'));
  EXPECT_FALSE(is_whitespace(U'\u200B'));  // zero width space is not White_Space
  EXPECT_FALSE(is_letter(kInvalidCodepoint));
}

TEST(Utf8, DecodingRejectsOverlongAndSurrogates) {
  EXPECT_EQ(decode_utf8("\xc0\x80", 0).codepoint, kInvalidCodepoint);      // overlong NUL
  EXPECT_EQ(decode_utf8("\xed\xa0\x80", 0).codepoint, kInvalidCodepoint);  // surrogate
  EXPECT_EQ(decode_utf8("\xf0\x9f\x99\x82", 0).codepoint, U'🙂');
  EXPECT_EQ(decode_utf8("\xf0\x9f\x99", 0).length, 1u);  // truncated: one byte at a time
}

}  // namespace
}  // namespace bdsl::models
