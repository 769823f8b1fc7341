#include "models/tokenizer/spm.h"

#include <queue>
#include <string>

namespace bdsl::models {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

// Bytes in the UTF-8 character that starts with `lead` (1 for a stray continuation byte).
std::size_t utf8_length(unsigned char lead) {
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

struct Symbol {
  int prev, next;
  std::size_t start, size;  // bytes of the text; size 0: merged into its left neighbour
};

struct Pair {
  float score;
  int left, right;
  std::size_t size;  // the joined text's bytes when queued: a pair whose symbols changed since is stale
  bool operator<(const Pair& o) const { return score < o.score || (score == o.score && left > o.left); }
};

}  // namespace

std::string spm_escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == ' ')
      out += kSpace;
    else
      out += c;
  }
  return out;
}

std::string spm_unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    if (text.compare(at, kSpace.size(), kSpace) == 0) {
      out += ' ';
      at += kSpace.size();
    } else {
      out += text[at++];
    }
  }
  return out;
}

void spm_tokenize(std::string_view text, const SpmVocabulary& vocab, std::vector<int32_t>& out) {
  std::vector<Symbol> symbols;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t n = std::min(utf8_length(static_cast<unsigned char>(text[at])), text.size() - at);
    const int i = static_cast<int>(symbols.size());
    symbols.push_back({i - 1, at + n == text.size() ? -1 : i + 1, at, n});
    at += n;
  }
  std::priority_queue<Pair> queue;
  auto joined = [&](int left, int right) { return text.substr(symbols[left].start, symbols[left].size + symbols[right].size); };
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const auto id = vocab.token(joined(left, right));
    if (!id) return;
    const float score = vocab.scores.empty() || size_t(*id) >= vocab.scores.size() ? 0.0f : vocab.scores[size_t(*id)];
    queue.push({score, left, right, symbols[left].size + symbols[right].size});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_pair(i - 1, i);
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& left = symbols[p.left];
    Symbol& right = symbols[p.right];
    if (left.size == 0 || right.size == 0 || left.size + right.size != p.size) continue;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = p.left;
    try_pair(left.prev, p.left);
    try_pair(p.left, left.next);
  }
  // Every merged piece is a token (only token pairs merge); a single character may not be.
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].size);
    if (const auto id = vocab.token(piece)) {
      out.push_back(*id);
      continue;
    }
    for (char c : piece) out.push_back(vocab.byte_token(static_cast<unsigned char>(c)));
  }
}

}  // namespace bdsl::models
