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

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

std::string bitnet(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string_view bos) {
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += bos;
    out += capitalize(messages[i].role);
    out += ": ";
    out += trim(messages[i].content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "Assistant: ";
  return out;
}

std::string llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string_view bos) {
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += bos;
    out += "<|start_header_id|>";
    out += messages[i].role;
    out += "<|end_header_id|>\n\n";
    out += trim(messages[i].content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// The template's plain branch: messages of other roles write nothing.
std::string falcon3(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string_view eos) {
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" || m.role == "user") {
      out += "<|" + m.role + "|>\n" + m.content + "\n";
    } else if (m.role == "assistant") {
      out += "<|assistant|>\n" + m.content;
      out += eos;
      if (i + 1 < messages.size()) out += "\n";
    }
  }
  if (add_generation_prompt && !messages.empty()) out += "<|assistant|>\n";  // inside the template's loop
  return out;
}

}  // namespace

const char* to_string(ChatFormat format) {
  switch (format) {
    case ChatFormat::BitNet: return "bitnet";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Falcon3: return "falcon3";
  }
  return "?";
}

ChatFormat chat_format_for(std::string_view chat_template, std::string_view architecture) {
  if (contains(chat_template, "<|start_header_id|>") && contains(chat_template, "<|end_header_id|>")) return ChatFormat::Llama3;
  // As bitnet.cpp's llama.cpp: Phi-3's markers (with "<|end|>") first, not Falcon3's.
  if (contains(chat_template, "<|user|>") && contains(chat_template, "<|assistant|>") && !contains(chat_template, "<|end|>"))
    return ChatFormat::Falcon3;
  if (contains(chat_template, "BITNET")) return ChatFormat::BitNet;
  return architecture == "llama" ? ChatFormat::Llama3 : ChatFormat::BitNet;
}

std::string apply_chat_template(ChatFormat format, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                std::string_view bos_text, std::string_view eos_text) {
  switch (format) {
    case ChatFormat::Llama3: return llama3(messages, add_generation_prompt, bos_text);
    case ChatFormat::Falcon3: return falcon3(messages, add_generation_prompt, eos_text);
    case ChatFormat::BitNet: break;
  }
  return bitnet(messages, add_generation_prompt, bos_text);
}

std::string apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                std::string_view bos_text) {
  return bitnet(messages, add_generation_prompt, bos_text);
}

}  // namespace bdsl::models
