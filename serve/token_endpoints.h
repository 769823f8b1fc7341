// llama-server's tokenizer endpoints, for clients that count or build prompts in the model's own
// tokens:
//   POST /tokenize   {"content": text, "add_special": false, "parse_special": true, "with_pieces": false}
//                    -> {"tokens": [ids]}, or with pieces [{"id", "piece"}]: a piece is its text,
//                    or its bytes as an array where they are not UTF-8 (part of a character)
//   POST /detokenize {"tokens": [ids]} -> {"content": text}
// Bad bodies are ApiErrors naming the field (ids outside the vocabulary by their index).
#pragma once
#include <nlohmann/json.hpp>

#include <string_view>

#include "models/tokenizer/tokenizer.h"

namespace bdsl::serve {

nlohmann::json tokenize_answer(std::string_view body, const models::Tokenizer& tokenizer);
nlohmann::json detokenize_answer(std::string_view body, const models::Tokenizer& tokenizer);

}  // namespace bdsl::serve
