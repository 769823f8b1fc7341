// The chat format BitNet b1.58 2B-4T was trained with: the Hugging Face tokenizer_config.json
// template, not the "Human: ... BITNETAssistant:" one stored in the GGUF (see docs/format.md):
//
//   {% for message in messages %}{% set content = message['role'] | capitalize + ': ' +
//   message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content =
//   bos_token + content %}{% endif %}{{ content }}{% endfor %}
//   {% if add_generation_prompt %}{{ 'Assistant: ' }}{% endif %}
//
// e.g. "<|begin_of_text|>User: Hi<|eot_id|>Assistant: ".
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace bdsl::models {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// The prompt text, starting with `bos_text` (pass the BOS token's text, e.g. "<|begin_of_text|>",
// or "" to leave it out). Encode it with parse_special on; Tokenizer::encode does not add a
// second BOS.
std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                std::string_view bos_text = "<|begin_of_text|>");

}  // namespace bdsl::models
