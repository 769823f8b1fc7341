// A small but real byte-level BPE vocabulary for synthetic models: the 256 byte tokens, merges
// learned by BPE training on a built-in English text (so common words are single tokens, as in a
// real vocabulary), further merges made deterministically (letter strings, breadth first) until
// the requested size, then LLaMA-3's special tokens (<|begin_of_text|>, <|end_of_text|>, ...,
// <|eot_id|>, reserved ones) at the end, as in the LLaMA-3 vocabulary.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/tokenizer/tokenizer.h"

namespace bdsl::golden {

// The tokenizer.ggml.* content: tokens in the byte-level alphabet, token types (1 normal, 3
// control), merges "left right", BOS = first special, EOS = second. Throws std::invalid_argument
// when vocab_size leaves no room for the byte tokens and the specials (minimum 266).
models::TokenizerSpec make_synthetic_vocab(uint32_t vocab_size);

// The same vocabulary as SentencePiece writes it (`tokenizer.ggml.model = "llama"`, 1bitLLM's
// files): the same ids, the 256 byte tokens as "<0xXX>" (type 6), every other ordinary token as
// its bytes with spaces written "▁" and the score -id (so earlier merges go first, as the BPE
// ranks have it), the special tokens as they are.
models::TokenizerSpec make_synthetic_sentencepiece_vocab(uint32_t vocab_size);

// How many special tokens a vocabulary of this size ends with (LLaMA-3 has 256).
uint32_t synthetic_special_count(uint32_t vocab_size);

}  // namespace bdsl::golden
