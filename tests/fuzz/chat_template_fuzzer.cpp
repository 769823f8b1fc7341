// libFuzzer target for the chat template (messages come from HTTP request bodies): the input is
// split at NUL bytes into role, content, role, content, ...; the first byte's low bit says
// whether to add the generation prompt. The prompt must have the template's structure (BOS
// first, one "<|eot_id|>" per message unless a content brings its own, "Assistant: " last when
// asked for) and must tokenize and decode back to itself with special tokens matched.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "golden/synthetic_vocab.h"
#include "models/tokenizer/chat_template.h"
#include "models/tokenizer/tokenizer.h"

namespace {

const bdsl::models::Tokenizer& tokenizer() {
  static const bdsl::models::Tokenizer t(bdsl::golden::make_synthetic_vocab(2048));
  return t;
}

std::size_t count(std::string_view text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool generation_prompt = data[0] & 1;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto end = rest.find('\0', start);
    parts.emplace_back(rest.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  std::vector<bdsl::models::ChatMessage> messages;
  std::size_t eots_in_input = 0;
  for (std::size_t i = 0; i + 1 < parts.size(); i += 2) {
    messages.push_back({parts[i], parts[i + 1]});
    // The template lower-cases a role past its first byte, which can spell the token.
    std::string role = parts[i];
    for (char& c : role) c = (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
    eots_in_input += count(role, "<|eot_id|>") + count(parts[i + 1], "<|eot_id|>");
  }
  const std::string bos = "<|begin_of_text|>";
  const std::string prompt = bdsl::models::apply_chat_template(messages, generation_prompt, bos);
  if (!messages.empty() && prompt.rfind(bos, 0) != 0) std::abort();
  if (generation_prompt && !prompt.ends_with("Assistant: ")) std::abort();
  if (count(prompt, "<|eot_id|>") < messages.size()) std::abort();
  if (eots_in_input == 0 && count(prompt, "<|eot_id|>") != messages.size()) std::abort();
  const auto& t = tokenizer();
  const auto ids = t.encode(prompt, /*add_bos=*/true, /*parse_special=*/true);
  if (ids.empty() || ids.front() != t.bos_id()) std::abort();
  // A prompt that starts with BOS's text keeps it as its one BOS token.
  const std::string decoded = t.decode(ids, /*render_special=*/true);
  if (decoded != (prompt.rfind(bos, 0) == 0 ? prompt : bos + prompt)) std::abort();
  return 0;
}
