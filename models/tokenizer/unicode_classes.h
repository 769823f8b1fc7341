// The few Unicode facts a byte-level BPE tokenizer needs: UTF-8 decoding that never fails (an
// invalid byte is its own "character", so any byte string can be tokenized and round-trips) and
// the character classes \p{L}, \p{N} and \s of the LLaMA-3 pre-tokenizer regex.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bdsl::models {

struct CodepointRange {
  char32_t first;
  char32_t last;  // inclusive
};

// One step of UTF-8 decoding. An ill-formed sequence (stray continuation byte, overlong form,
// surrogate, truncated tail) yields `kInvalidCodepoint` with length 1, so the caller moves on by
// exactly one byte and keeps every byte of the input.
inline constexpr char32_t kInvalidCodepoint = 0xFFFFFFFFu;
struct Utf8Char {
  char32_t codepoint;
  std::size_t length;  // bytes consumed, 1..4
};
Utf8Char decode_utf8(std::string_view text, std::size_t pos);

// Appends the UTF-8 form of a valid code point (<= 0x10FFFF, not a surrogate).
void append_utf8(std::string& out, char32_t codepoint);

// General category L* (letters), N* (numbers), and the White_Space property (regex \s).
// kInvalidCodepoint is none of them.
bool is_letter(char32_t cp);
bool is_number(char32_t cp);
bool is_whitespace(char32_t cp);

namespace unicode_data {
extern const CodepointRange kLetterRanges[];
extern const std::size_t kLetterRangeCount;
extern const CodepointRange kNumberRanges[];
extern const std::size_t kNumberRangeCount;
}  // namespace unicode_data

}  // namespace bdsl::models
