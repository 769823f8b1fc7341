// Tokenizer::from_gguf: the tokenizer.ggml.* keys of a GGUF file into a TokenizerSpec.
#include <string>

#include "models/formats/gguf.h"
#include "models/tokenizer/tokenizer.h"

namespace bdsl::models {

namespace {

std::vector<std::string> string_array(const GgufFile& file, std::string_view key) {
  const auto views = file.get_string_array(key);
  return {views.begin(), views.end()};
}

// token_type is INT32 in the files llama.cpp writes; accept any integer element type.
std::vector<int32_t> token_types(const GgufFile& file) {
  const GgufArray* array = file.find_array("tokenizer.ggml.token_type");
  if (!array) return {};
  if (array->element_type() == GgufValueType::INT32) return array->to_vector<int32_t>();
  std::vector<int32_t> out;
  out.reserve(array->size());
  for (uint64_t i = 0; i < array->size(); ++i) {
    const auto v = array->at(i).to_i64();
    if (!v) throw GgufError(file.name() + ": tokenizer.ggml.token_type[" + std::to_string(i) + "] is not an integer");
    out.push_back(static_cast<int32_t>(*v));
  }
  return out;
}

// Token ids are UINT32 in llama.cpp's files; any integer that fits in int32 is accepted.
std::optional<int32_t> token_id(const GgufFile& file, std::string_view key) {
  const auto v = file.find_uint(key);
  if (!v) return std::nullopt;
  if (*v > INT32_MAX) {
    throw GgufError(file.name() + ": " + std::string(key) + " = " + std::to_string(*v) + " is not a token id");
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  TokenizerSpec spec;
  spec.model = std::string(file.get_string("tokenizer.ggml.model"));
  if (const auto pre = file.find_string("tokenizer.ggml.pre")) spec.pre = std::string(*pre);
  spec.tokens = string_array(file, "tokenizer.ggml.tokens");
  spec.token_types = token_types(file);
  if (file.contains("tokenizer.ggml.merges")) spec.merges = string_array(file, "tokenizer.ggml.merges");
  if (spec.model == "llama") {  // SentencePiece's own keys
    if (file.contains("tokenizer.ggml.scores")) spec.scores = file.get_array_of<float>("tokenizer.ggml.scores");
    spec.add_space_prefix = file.find_as<bool>("tokenizer.ggml.add_space_prefix").value_or(true);
  }
  spec.bos_id = token_id(file, "tokenizer.ggml.bos_token_id").value_or(-1);
  spec.eos_id = token_id(file, "tokenizer.ggml.eos_token_id").value_or(-1);
  spec.eot_id = token_id(file, "tokenizer.ggml.eot_token_id");
  // A template key of another type names no format: the architecture decides.
  auto string_or_empty = [&](std::string_view key) -> std::string_view {
    try {
      return file.find_string(key).value_or("");
    } catch (const GgufError&) {
      return "";
    }
  };
  spec.chat_format = chat_format_for(string_or_empty("tokenizer.chat_template"), string_or_empty("general.architecture"));
  try {
    return Tokenizer(spec);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(file.name() + ": " + e.what());
  }
}

}  // namespace bdsl::models
