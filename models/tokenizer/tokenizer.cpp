#include "models/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "models/tokenizer/byte_unicode.h"
#include "models/tokenizer/pretokenizer.h"
#include "models/tokenizer/spm.h"

namespace bdsl::models {

namespace {

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error("tokenizer: " + message); }

bool is_special(TokenType t) {
  return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

// The byte of "<0xXX>" (two hex digits, either case), or none.
std::optional<unsigned char> byte_of(const std::string& t) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>' || digit(t[3]) < 0 || digit(t[4]) < 0) return std::nullopt;
  return static_cast<unsigned char>(digit(t[3]) * 16 + digit(t[4]));
}

TokenType checked_type(int32_t value, std::size_t index) {
  if (value < 0 || value > static_cast<int32_t>(TokenType::Byte)) {
    fail("tokenizer.ggml.token_type[" + std::to_string(index) + "] = " + std::to_string(value) +
         ", expected 0..6");
  }
  return static_cast<TokenType>(value);
}

}  // namespace

Tokenizer::Tokenizer(const TokenizerSpec& spec) {
  if (spec.model != "gpt2" && spec.model != "llama") {
    fail("tokenizer.ggml.model is '" + spec.model + "', expected 'gpt2' (byte-level BPE) or 'llama' (SentencePiece)");
  }
  // llama.cpp's names for the LLaMA-3 split; a missing key means the same (the BitNet file has none).
  if (spec.model == "gpt2" && spec.pre && *spec.pre != "llama-bpe" && *spec.pre != "llama3" && *spec.pre != "llama-v3") {
    fail("tokenizer.ggml.pre is '" + *spec.pre +
         "', only 'llama-bpe' (the LLaMA-3 split; also assumed when the key is missing) is supported");
  }
  load_texts_and_types(spec);
  if (spec.model == "llama") {
    load_sentencepiece(spec);
  } else {
    load_vocabulary();
    load_merges(spec.merges);
  }
  // Special tokens grouped by first byte, longest first (special_at takes the first that matches).
  for (auto& group : specials_by_first_byte_) {
    std::erase_if(group, [](const SpecialToken& s) { return s.text.empty(); });
    std::stable_sort(group.begin(), group.end(),
                     [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
  }
  load_special_ids(spec);
  chat_format_ = spec.chat_format;
}

std::string Tokenizer::chat_prompt(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  const std::string_view bos = bos_id_ >= 0 ? std::string_view(texts_[size_t(bos_id_)]) : std::string_view();
  const std::string_view eos = eos_id_ >= 0 ? std::string_view(texts_[size_t(eos_id_)]) : std::string_view();
  return apply_chat_template(chat_format_, messages, add_generation_prompt, bos, eos);
}

void Tokenizer::load_texts_and_types(const TokenizerSpec& spec) {
  const std::size_t n = spec.tokens.size();
  if (n == 0) fail("tokenizer.ggml.tokens is empty");
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    fail("tokenizer.ggml.token_type has " + std::to_string(spec.token_types.size()) +
         " entries, expected one per token (" + std::to_string(n) + ")");
  }
  texts_ = spec.tokens;
  bytes_.resize(n);
  types_.resize(n, TokenType::Normal);
  for (std::size_t i = 0; i < n && !spec.token_types.empty(); ++i) types_[i] = checked_type(spec.token_types[i], i);
}

void Tokenizer::load_vocabulary() {
  const std::size_t n = texts_.size();
  // Special tokens stand for their own text; ordinary ones are written in the byte alphabet.
  for (std::size_t i = 0; i < n; ++i) bytes_[i] = is_special(types_[i]) ? texts_[i] : byte_level_to_bytes(texts_[i]);
  std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    id_by_text_.try_emplace(texts_[i], id);
    if (is_special(types_[i])) {
      specials_by_first_byte_[static_cast<unsigned char>(texts_[i].empty() ? 0 : texts_[i][0])]
          .push_back({texts_[i], id});
      continue;
    }
    id_by_bytes_.try_emplace(bytes_[i], id);
    if (bytes_[i].size() == 1 && byte_token_[static_cast<unsigned char>(bytes_[i][0])] < 0) {
      byte_token_[static_cast<unsigned char>(bytes_[i][0])] = id;
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_token_[b] < 0) {
      fail("tokenizer.ggml.tokens has no token for byte " + std::to_string(b) + " ('" +
           bytes_to_byte_level(std::string(1, static_cast<char>(b))) +
           "'): a byte-level vocabulary needs all 256");
    }
  }
}

// SentencePiece: a token stands for its text with "▁" as a space; a byte token "<0xXX>" for that
// byte, the byte fallback of any character outside the vocabulary (every byte needs one).
void Tokenizer::load_sentencepiece(const TokenizerSpec& spec) {
  sentencepiece_ = true;
  add_space_prefix_ = spec.add_space_prefix;
  const std::size_t n = texts_.size();
  if (!spec.scores.empty() && spec.scores.size() != n) {
    fail("tokenizer.ggml.scores has " + std::to_string(spec.scores.size()) + " entries, expected one per token (" +
         std::to_string(n) + ")");
  }
  scores_ = spec.scores;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(scores_.empty() ? 0.0f : scores_[i]))
      fail("tokenizer.ggml.scores[" + std::to_string(i) + "] is not a finite number");
    const std::string& t = texts_[i];
    const auto id = static_cast<int32_t>(i);
    id_by_text_.insert_or_assign(t, id);  // as llama.cpp: a text given twice means its last token
    if (types_[i] == TokenType::Byte) {
      const auto value = byte_of(t);
      if (!value) fail("tokenizer.ggml.tokens[" + std::to_string(i) + "] = '" + t + "' is a byte token, expected <0xXX>");
      bytes_[i] = std::string(1, static_cast<char>(*value));
    } else if (is_special(types_[i])) {
      bytes_[i] = t;
      specials_by_first_byte_[static_cast<unsigned char>(t.empty() ? 0 : t[0])].push_back({t, id});
    } else {
      bytes_[i] = spm_unescape_spaces(t);
    }
  }
  // As llama.cpp's byte_to_token: the token whose text is "<0xXX>" (whatever its type), else a
  // token of the byte itself.
  for (int b = 0; b < 256; ++b) {
    char name[7];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto token = find_token(name);
    const auto single = token ? token : find_token(std::string(1, static_cast<char>(b)));
    if (!single)
      fail(std::string("tokenizer.ggml.tokens has no byte token ") + name + ": SentencePiece's byte fallback needs all 256");
    byte_token_[b] = *single;
  }
}

void Tokenizer::encode_sentencepiece(std::string_view fragment, bool after_special, std::vector<int32_t>& out) const {
  if (fragment.empty()) return;
  // As llama.cpp: a space in front of the text that starts the prompt or follows a special token.
  const std::string text = spm_escape_spaces(add_space_prefix_ && after_special ? " " + std::string(fragment) : std::string(fragment));
  const SpmVocabulary vocab{[this](std::string_view piece) { return find_token(piece); }, scores_,
                            [this](unsigned char b) { return byte_token_[b]; }};
  spm_tokenize(text, vocab, out);
}

void Tokenizer::load_merges(const std::vector<std::string>& merges) {
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    // Byte-level tokens never contain a raw space, so the first space (after the first
    // character) separates the two halves.
    const std::size_t space = m.find(' ', 1);
    const auto where = [&] { return "tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" + m + "'"; };
    if (space == std::string::npos) fail(where() + ": expected 'left right'");
    const std::string left = m.substr(0, space);
    const std::string right = m.substr(space + 1);
    const auto l = id_by_text_.find(left);
    const auto r = id_by_text_.find(right);
    const auto merged = id_by_text_.find(left + right);
    if (l == id_by_text_.end() || r == id_by_text_.end() || merged == id_by_text_.end()) {
      fail(where() + ": '" + (l == id_by_text_.end() ? left : r == id_by_text_.end() ? right : left + right) +
           "' is not in tokenizer.ggml.tokens");
    }
    merges_.add(l->second, r->second, merged->second, static_cast<int32_t>(rank));
  }
}

void Tokenizer::load_special_ids(const TokenizerSpec& spec) {
  const auto checked = [&](int32_t id, const char* key) {
    if (id < -1 || id >= vocab_size()) {
      fail(std::string(key) + " = " + std::to_string(id) + " is outside the vocabulary (0.." +
           std::to_string(vocab_size() - 1) + ")");
    }
    return id;
  };
  bos_id_ = checked(spec.bos_id, "tokenizer.ggml.bos_token_id");
  eos_id_ = checked(spec.eos_id, "tokenizer.ggml.eos_token_id");
  if (spec.eot_id) {
    eot_id_ = checked(*spec.eot_id, "tokenizer.ggml.eot_token_id");
  } else if (const auto eot = find_token("<|eot_id|>")) {
    eot_id_ = *eot;
  }
}

void Tokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw std::out_of_range("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                            std::to_string(vocab_size() - 1) + ")");
  }
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  check_id(id);
  return bytes_[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return texts_[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return types_[id];
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const auto it = id_by_text_.find(text);
  if (it == id_by_text_.end()) return std::nullopt;
  return it->second;
}

std::optional<Tokenizer::SpecialToken> Tokenizer::special_at(std::string_view text, std::size_t pos) const {
  for (const SpecialToken& s : specials_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
    if (text.compare(pos, s.text.size(), s.text) == 0) return s;
  }
  return std::nullopt;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  // Pieces repeat a lot in real text: one BPE run per distinct piece in this call.
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;
  std::size_t plain_start = 0;
  bool after_special = true;  // SentencePiece: the prompt's first text takes the space prefix
  auto plain = [&](std::string_view fragment) {
    if (sentencepiece_)
      encode_sentencepiece(fragment, after_special, out);
    else
      encode_plain(fragment, out, cache);
    if (!fragment.empty()) after_special = false;
  };
  for (std::size_t pos = 0; parse_special && pos < text.size();) {
    const auto special = special_at(text, pos);
    if (!special) {
      ++pos;
      continue;
    }
    if (pos > plain_start) plain(text.substr(plain_start, pos - plain_start));
    out.push_back(special->id);
    after_special = true;
    pos += special->text.size();
    plain_start = pos;
  }
  plain(text.substr(plain_start));
  if (add_bos && bos_id_ >= 0 && (out.empty() || out.front() != bos_id_)) out.insert(out.begin(), bos_id_);
  return out;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out,
                             std::unordered_map<std::string_view, std::vector<int32_t>>& cache) const {
  for (std::string_view word : split_llama3(text)) {
    auto [it, inserted] = cache.try_emplace(word);
    if (inserted) encode_word(word, it->second);
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

void Tokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  // LLaMA-3 sets `ignore_merges`: a word that is itself a token is taken whole, even where the
  // merges would not build it.
  if (const auto whole = id_by_bytes_.find(word); whole != id_by_bytes_.end()) {
    out.assign(1, whole->second);
    return;
  }
  out.clear();
  for (char c : word) out.push_back(byte_token_[static_cast<unsigned char>(c)]);
  merges_.apply(out);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) {
    check_id(id);
    if (!render_special && types_[id] == TokenType::Control) continue;
    out += bytes_[id];
  }
  return out;
}

}  // namespace bdsl::models
