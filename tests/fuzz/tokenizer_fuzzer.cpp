// libFuzzer target for the tokenizer (prompt text comes from users and HTTP bodies): arbitrary
// bytes, not only UTF-8, are encoded with a real byte-level BPE vocabulary (the synthetic one
// test models use: byte tokens, trained merges, LLaMA-3's special tokens). encode must not
// crash, every id must be in the vocabulary, and decode(encode(text)) must give the text back
// byte for byte, with special tokens matched and with them tokenized as plain text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "golden/synthetic_vocab.h"
#include "models/tokenizer/tokenizer.h"

namespace {

const bdsl::models::Tokenizer& tokenizer() {
  static const bdsl::models::Tokenizer t(bdsl::golden::make_synthetic_vocab(2048));
  return t;
}

void round_trip(std::string_view text, bool parse_special) {
  const auto& t = tokenizer();
  const auto ids = t.encode(text, /*add_bos=*/false, parse_special);
  for (int32_t id : ids)
    if (id < 0 || id >= t.vocab_size()) std::abort();
  if (t.decode(ids, /*render_special=*/true) != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  round_trip(text, true);
  round_trip(text, false);
  // BOS is added once, in front, whatever the text starts with.
  const auto& t = tokenizer();
  const auto with_bos = t.encode(text, /*add_bos=*/true);
  if (with_bos.empty() || with_bos.front() != t.bos_id()) std::abort();
  return 0;
}
