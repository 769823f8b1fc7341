// A flag's numeric value as every command parses it: the whole text a number of type T (and with
// bounds, inside them), else a UsageError naming the flag and what was given.
#pragma once
#include <charconv>
#include <string>

#include "tools/command.h"

namespace bdsl::tools {

template <class T>
T flag_number(const std::string& flag, const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) throw UsageError(flag + " expects a number, got '" + text + "'");
  return value;
}

template <class T>
T flag_number(const std::string& flag, const std::string& text, T lo, T hi) {
  const T value = flag_number<T>(flag, text);
  if (value < lo || value > hi)
    throw UsageError(flag + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + text);
  return value;
}

}  // namespace bdsl::tools
