#include "models/tokenizer/byte_unicode.h"

#include <array>

#include "models/tokenizer/unicode_classes.h"

namespace bdsl::models {

namespace {

bool stands_for_itself(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

struct ByteTables {
  std::array<char32_t, 256> to_unicode{};
  std::array<int, 256 + 68> to_byte{};  // indexed by code point; -1 where none

  ByteTables() {
    to_byte.fill(-1);
    char32_t next_shifted = 256;
    for (unsigned b = 0; b < 256; ++b) {
      to_unicode[b] = stands_for_itself(b) ? char32_t(b) : next_shifted++;
      to_byte[to_unicode[b]] = static_cast<int>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

char32_t byte_to_unicode(unsigned char byte) { return tables().to_unicode[byte]; }

std::optional<unsigned char> unicode_to_byte(char32_t cp) {
  if (cp >= tables().to_byte.size() || tables().to_byte[cp] < 0) return std::nullopt;
  return static_cast<unsigned char>(tables().to_byte[cp]);
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_unicode(static_cast<unsigned char>(c)));
  return out;
}

std::string byte_level_to_bytes(std::string_view text, bool* all_mapped) {
  std::string out;
  out.reserve(text.size());
  bool mapped = true;
  for (std::size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    const auto byte = unicode_to_byte(c.codepoint);
    if (byte) {
      out += static_cast<char>(*byte);
    } else {
      out.append(text.substr(pos, c.length));
      mapped = false;
    }
    pos += c.length;
  }
  if (all_mapped) *all_mapped = mapped;
  return out;
}

}  // namespace bdsl::models
