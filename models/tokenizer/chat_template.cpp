#include "models/tokenizer/chat_template.h"

namespace bdsl::models {

namespace {

// Jinja's `capitalize`: first character upper case, the rest lower case (ASCII, as roles are).
std::string capitalize(std::string_view s) {
  std::string out(s);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (i == 0 && c >= 'a' && c <= 'z') out[i] = static_cast<char>(c - 'a' + 'A');
    if (i > 0 && c >= 'A' && c <= 'Z') out[i] = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Jinja's `trim`: strip leading and trailing whitespace.
std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const std::size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

}  // namespace

std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                std::string_view bos_text) {
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += bos_text;
    out += capitalize(messages[i].role);
    out += ": ";
    out += trim(messages[i].content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "Assistant: ";
  return out;
}

}  // namespace bdsl::models
