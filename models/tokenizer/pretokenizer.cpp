#include "models/tokenizer/pretokenizer.h"

#include <algorithm>
#include <cstddef>

#include "models/tokenizer/unicode_classes.h"

namespace bdsl::models {

namespace {

// The text as code points, with each one's byte offset (offsets has one extra entry: the end).
class Llama3Scanner {
 public:
  explicit Llama3Scanner(std::string_view text) : text_(text) {
    for (std::size_t pos = 0; pos < text.size();) {
      const Utf8Char c = decode_utf8(text, pos);
      cps_.push_back(c.codepoint);
      offsets_.push_back(pos);
      pos += c.length;
    }
    offsets_.push_back(text.size());
  }

  std::vector<std::string_view> split() const {
    std::vector<std::string_view> pieces;
    for (std::size_t i = 0; i < cps_.size();) {
      const std::size_t end = match_at(i);
      pieces.push_back(text_.substr(offsets_[i], offsets_[end] - offsets_[i]));
      i = end;
    }
    return pieces;
  }

 private:
  static constexpr char32_t kEnd = 0;  // past the end; never tested as a class member below

  std::size_t size() const { return cps_.size(); }
  char32_t cp(std::size_t i) const { return i < size() ? cps_[i] : kEnd; }
  bool letter(std::size_t i) const { return i < size() && is_letter(cps_[i]); }
  bool number(std::size_t i) const { return i < size() && is_number(cps_[i]); }
  bool space(std::size_t i) const { return i < size() && is_whitespace(cps_[i]); }
  bool newline(std::size_t i) const { return cp(i) == '\r' || cp(i) == '\n'; }
  // [^\s\p{L}\p{N}]: punctuation, symbols, controls that are not \s, and invalid bytes.
  bool other(std::size_t i) const { return i < size() && !space(i) && !letter(i) && !number(i); }

  // The alternatives in regex order; each returns the end of its match, or `i` for no match.
  std::size_t match_at(std::size_t i) const {
    for (auto alternative : {&Llama3Scanner::contraction, &Llama3Scanner::letters,
                             &Llama3Scanner::digits, &Llama3Scanner::punctuation,
                             &Llama3Scanner::whitespace}) {
      const std::size_t end = (this->*alternative)(i);
      if (end > i) return end;
    }
    return i + 1;  // unreachable: every character starts one of the alternatives
  }

  // Case-insensitive ASCII; U+017F (long s) folds to 's' as it does in the reference engines.
  char32_t folded(std::size_t i) const {
    const char32_t c = cp(i);
    if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
    return c == 0x017F ? U's' : c;
  }

  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  std::size_t contraction(std::size_t i) const {
    if (cp(i) != '\'') return i;
    const char32_t a = folded(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    const char32_t b = folded(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return i;
  }

  // [^\r\n\p{L}\p{N}]?\p{L}+
  std::size_t letters(std::size_t i) const {
    std::size_t j = i;
    if (!letter(j)) {
      if (j >= size() || newline(j) || number(j) || !letter(j + 1)) return i;
      ++j;  // the optional leading character
    }
    while (letter(j)) ++j;
    return j;
  }

  // \p{N}{1,3}
  std::size_t digits(std::size_t i) const {
    std::size_t j = i;
    while (j < i + 3 && number(j)) ++j;
    return j;
  }

  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  std::size_t punctuation(std::size_t i) const {
    std::size_t j = cp(i) == ' ' ? i + 1 : i;
    if (!other(j)) return i;
    while (other(j)) ++j;
    while (newline(j)) ++j;
    return j;
  }

  // \s*[\r\n]+ | \s+(?!\S) | \s+  over one maximal run of whitespace.
  std::size_t whitespace(std::size_t i) const {
    std::size_t run_end = i;
    std::size_t after_last_newline = i;
    for (; space(run_end); ++run_end) {
      if (newline(run_end)) after_last_newline = run_end + 1;
    }
    if (run_end == i) return i;
    if (after_last_newline > i) return after_last_newline;  // \s*[\r\n]+ backtracks to the last one
    // \s+(?!\S): leave the last space to prefix the word that follows (" word"), unless the run
    // is one character long (then plain \s+ takes it) or ends the text.
    if (run_end - i > 1 && run_end < size()) return run_end - 1;
    return run_end;
  }

  std::string_view text_;
  std::vector<char32_t> cps_;
  std::vector<std::size_t> offsets_;
};

}  // namespace

std::vector<std::string_view> split_llama3(std::string_view text) { return Llama3Scanner(text).split(); }

}  // namespace bdsl::models
