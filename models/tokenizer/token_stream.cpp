#include "models/tokenizer/token_stream.h"

namespace bdsl::models {

namespace {

// Number of bytes a sequence starting with `lead` has, or 0 if `lead` cannot start one.
std::size_t sequence_length(unsigned char lead) {
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

}  // namespace

std::size_t complete_utf8_prefix(const std::string& bytes) {
  // Only the last three bytes can belong to an unfinished sequence (sequences are at most 4 long).
  const std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for the lead
    const std::size_t needed = sequence_length(b);
    return needed > back ? n - back : n;
  }
  return n;
}

std::string TokenStreamDecoder::push(int32_t id) {
  const int32_t one[] = {id};
  pending_ += tokenizer_->decode(one, render_special_);
  const std::size_t ready = complete_utf8_prefix(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

std::string TokenStreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace bdsl::models
