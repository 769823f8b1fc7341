#include "serve/token_endpoints.h"

#include <string>
#include <vector>

#include "models/tokenizer/unicode_classes.h"
#include "serve/api_error.h"
#include "serve/openai_request.h"

namespace bdsl::serve {

using nlohmann::json;

namespace {

// A token's piece as llama-server gives it: its text where its bytes are UTF-8, else the bytes
// (part of a character split over tokens).
json piece(std::string_view bytes) {
  for (size_t at = 0; at < bytes.size();) {
    const models::Utf8Char c = models::decode_utf8(bytes, at);
    if (c.codepoint == models::kInvalidCodepoint) {
      json out = json::array();
      for (unsigned char b : bytes) out.push_back(int(b));
      return out;
    }
    at += c.length;
  }
  return std::string(bytes);
}

}  // namespace

json tokenize_answer(std::string_view body, const models::Tokenizer& tokenizer) {
  const json j = parse_json_object(body);
  const auto it = j.find("content");
  if (it == j.end() || it->is_null()) throw bad_field("content", "'content' is required", "missing_required_parameter");
  if (!it->is_string()) throw bad_field("content", "'content' must be a string", "invalid_type");
  const std::vector<int32_t> ids =
      tokenizer.encode(it->get_ref<const std::string&>(), boolean(j, "add_special", false), boolean(j, "parse_special", true));
  if (!boolean(j, "with_pieces", false)) return {{"tokens", ids}};
  json tokens = json::array();
  for (int32_t id : ids) tokens.push_back({{"id", id}, {"piece", piece(tokenizer.token_bytes(id))}});
  return {{"tokens", tokens}};
}

json detokenize_answer(std::string_view body, const models::Tokenizer& tokenizer) {
  const json j = parse_json_object(body);
  const auto it = j.find("tokens");
  if (it == j.end() || it->is_null()) throw bad_field("tokens", "'tokens' is required", "missing_required_parameter");
  if (!it->is_array()) throw bad_field("tokens", "'tokens' must be an array of token ids", "invalid_type");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& id = (*it)[i];
    if (!id.is_number_integer()) throw bad_field("tokens", "'tokens[" + std::to_string(i) + "]' must be an integer", "invalid_type");
    if (id.get<int64_t>() < 0 || id.get<int64_t>() >= tokenizer.vocab_size())
      throw bad_field("tokens", "'tokens[" + std::to_string(i) + "]' is " + id.dump() + ", outside the vocabulary of " +
                                    std::to_string(tokenizer.vocab_size()) + " tokens");
    ids.push_back(int32_t(id.get<int64_t>()));
  }
  return {{"content", tokenizer.decode(ids, true)}};
}

}  // namespace bdsl::serve
