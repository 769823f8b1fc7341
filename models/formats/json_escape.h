// JSON string quoting shared by `inspect --json` and value rendering: escapes quotes,
// backslashes and control characters, and replaces bytes that are not valid UTF-8 with U+FFFD
// (token strings in GGUF files are arbitrary bytes; JSON must be UTF-8).
#pragma once
#include <string>
#include <string_view>

namespace bdsl::models {

std::string quote_json_string(std::string_view s);

}  // namespace bdsl::models
