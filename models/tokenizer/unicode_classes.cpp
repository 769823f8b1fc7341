#include "models/tokenizer/unicode_classes.h"

#include <algorithm>

namespace bdsl::models {

namespace {

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

bool in_ranges(char32_t cp, const CodepointRange* ranges, std::size_t count) {
  const CodepointRange* end = ranges + count;
  // First range whose end is >= cp; cp is inside it iff it also starts at or before cp.
  const CodepointRange* it =
      std::lower_bound(ranges, end, cp, [](const CodepointRange& r, char32_t c) { return r.last < c; });
  return it != end && it->first <= cp;
}

}  // namespace

Utf8Char decode_utf8(std::string_view text, std::size_t pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) return {b0, 1};
  std::size_t length = 0;
  char32_t cp = 0;
  char32_t min_value = 0;  // smallest code point that needs this many bytes (rejects overlong forms)
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, cp = b0 & 0x1F, min_value = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, cp = b0 & 0x0F, min_value = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, cp = b0 & 0x07, min_value = 0x10000;
  } else {
    return {kInvalidCodepoint, 1};
  }
  if (pos + length > text.size()) return {kInvalidCodepoint, 1};
  for (std::size_t i = 1; i < length; ++i) {
    const auto b = static_cast<unsigned char>(text[pos + i]);
    if (!is_continuation(b)) return {kInvalidCodepoint, 1};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_value || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalidCodepoint, 1};
  return {cp, length};
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_letter(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z');
  if (cp == kInvalidCodepoint) return false;
  return in_ranges(cp, unicode_data::kLetterRanges, unicode_data::kLetterRangeCount);
}

bool is_number(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  if (cp == kInvalidCodepoint) return false;
  return in_ranges(cp, unicode_data::kNumberRanges, unicode_data::kNumberRangeCount);
}

bool is_whitespace(char32_t cp) {
  // The Unicode White_Space property, which is what \s means in the regex engines the
  // reference tokenizers use (Rust regex, Oniguruma).
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace bdsl::models
