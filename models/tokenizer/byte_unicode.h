// GPT-2's byte-level alphabet: every byte is shown as a printable code point so that a BPE
// vocabulary can be stored as text. Printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC,
// U+00AE..U+00FF) stand for themselves; the other 68 bytes become U+0100, U+0101, ... in byte
// order (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace bdsl::models {

char32_t byte_to_unicode(unsigned char byte);
std::optional<unsigned char> unicode_to_byte(char32_t cp);

// Raw bytes -> their byte-level text (UTF-8), e.g. " hi" -> "Ġhi".
std::string bytes_to_byte_level(std::string_view bytes);

// Byte-level text -> raw bytes. A code point outside the alphabet (possible only in a malformed
// vocabulary) is kept as its own UTF-8 bytes, so nothing is lost; `all_mapped` tells the caller.
std::string byte_level_to_bytes(std::string_view text, bool* all_mapped = nullptr);

}  // namespace bdsl::models
