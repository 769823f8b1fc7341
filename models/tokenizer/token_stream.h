// Turns generated tokens into printable text as they arrive. A byte-level token may end in the
// middle of a UTF-8 character; the decoder holds such a tail back until the next token completes
// it, so a terminal never sees half a character. Bytes that can never become valid UTF-8 are
// passed through at once (holding them would only delay them).
#pragma once
#include <cstdint>
#include <string>

#include "models/tokenizer/tokenizer.h"

namespace bdsl::models {

class TokenStreamDecoder {
 public:
  explicit TokenStreamDecoder(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(&tokenizer), render_special_(render_special) {}

  // The text that became complete with this token (possibly empty).
  std::string push(int32_t id);
  // Whatever is still held back (an unfinished character at the end of the stream).
  std::string flush();

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;
};

// Length of the longest prefix of `bytes` that does not end inside an unfinished, still possibly
// valid UTF-8 sequence.
std::size_t complete_utf8_prefix(const std::string& bytes);

}  // namespace bdsl::models
