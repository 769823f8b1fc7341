// The LLaMA-3 pre-tokenizer ("llama-bpe"): splits text into the pieces that byte-level BPE then
// merges independently. It is the regex
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// applied leftmost-first, written by hand as a scanner (one function per alternative) so that it
// needs no regex library and runs in linear time. Bytes that are not valid UTF-8 are kept, each
// as a character of no class (they behave like punctuation), so the pieces always concatenate
// back to the input.
#pragma once
#include <string_view>
#include <vector>

namespace bdsl::models {

std::vector<std::string_view> split_llama3(std::string_view text);

}  // namespace bdsl::models
