// A hand-made byte-level vocabulary for tokenizer tests: the 256 byte tokens, the merges given,
// and a few control tokens.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "models/tokenizer/byte_unicode.h"
#include "models/tokenizer/tokenizer.h"

namespace bdsl::test {

// `merges` are written with raw bytes ("h e", " w"), converted to the byte-level alphabet here.
inline models::TokenizerSpec hand_made_spec(const std::vector<std::pair<std::string, std::string>>& merges) {
  models::TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(models::bytes_to_byte_level(std::string(1, char(b))));
  spec.token_types.assign(256, 1);
  for (const auto& [l, r] : merges) {
    const std::string merged = models::bytes_to_byte_level(l + r);
    if (std::find(spec.tokens.begin(), spec.tokens.end(), merged) == spec.tokens.end()) {
      spec.tokens.push_back(merged);
      spec.token_types.push_back(1);
    }
    spec.merges.push_back(models::bytes_to_byte_level(l) + " " + models::bytes_to_byte_level(r));
  }
  for (const char* s : {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|eot_id_long|>"}) {
    spec.tokens.push_back(s);
    spec.token_types.push_back(3);
  }
  spec.bos_id = static_cast<int32_t>(spec.tokens.size() - 4);
  spec.eos_id = spec.bos_id + 1;
  return spec;
}

}  // namespace bdsl::test
