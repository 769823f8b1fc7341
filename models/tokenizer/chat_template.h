// The chat formats of the 1.58-bit family's instruct models (docs/model-family.md section 5 has
// each template's Jinja text, its source and rendered reference strings):
//
// - BitNet: what BitNet b1.58 2B-4T was trained with, the Hugging Face tokenizer_config.json
//   template, not the "Human: ... BITNETAssistant:" one stored in its GGUF (see docs/format.md):
//     {% for message in messages %}{% set content = message['role'] | capitalize + ': ' +
//     message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content =
//     bos_token + content %}{% endif %}{{ content }}{% endfor %}
//     {% if add_generation_prompt %}{{ 'Assistant: ' }}{% endif %}
//   e.g. "<|begin_of_text|>User: Hi<|eot_id|>Assistant: ".
// - Llama3 (Meta-Llama-3-8B-Instruct, which HF1BitLLM's Llama3-8B-1.58 uses): per message
//   "<|start_header_id|>" role "<|end_header_id|>\n\n" trim(content) "<|eot_id|>", BOS before the
//   first; then "<|start_header_id|>assistant<|end_header_id|>\n\n".
// - Falcon3 (Falcon3 Instruct, its template's plain branch): "<|" role "|>\n" content "\n" for
//   system and user, "<|assistant|>\n" content EOS (+ "\n" unless last) for the assistant; then
//   "<|assistant|>\n". No BOS, content not trimmed.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace bdsl::models {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

enum class ChatFormat { BitNet, Llama3, Falcon3 };
const char* to_string(ChatFormat format);

// The format of a model file: its tokenizer.chat_template's text where it has one that names a
// known format (by the markers llama.cpp's built-in detection looks for: "<|start_header_id|>"
// and "<|end_header_id|>" for Llama 3, "<|user|>" and "<|assistant|>" without Phi-3's "<|end|>"
// for Falcon3, "BITNET" for
// the template bitnet.cpp writes into 2B-4T's GGUF), else its general.architecture ("llama":
// Llama3; the BitNet architectures and anything else: BitNet).
ChatFormat chat_format_for(std::string_view chat_template, std::string_view architecture);

// The prompt text in `format`. `bos_text` and `eos_text` are the BOS and EOS tokens' text (e.g.
// "<|begin_of_text|>"; "" leaves BOS out); encode the result with parse_special on and without
// add_bos (the formats that want BOS write it).
std::string apply_chat_template(ChatFormat format, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                std::string_view bos_text, std::string_view eos_text);
// The BitNet format.
std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                std::string_view bos_text = "<|begin_of_text|>");

}  // namespace bdsl::models
