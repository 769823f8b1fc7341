#include "golden/synthetic_vocab.h"

#include <cstdio>
#include <deque>
#include <map>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "models/tokenizer/byte_unicode.h"
#include "models/tokenizer/pretokenizer.h"
#include "models/tokenizer/spm.h"

namespace bdsl::golden {

namespace {

// Training text for the learned merges (written for this project; any English prose would do).
constexpr std::string_view kCorpus =
    "The model reads the prompt, one token at a time or all at once, and writes the next token. "
    "Each layer of the network keeps its keys and values in a cache, so that the next step does "
    "not have to compute them again. A weight is minus one, zero or plus one; an activation is a "
    "small integer with a scale for the whole row. When the numbers agree with the reference, the "
    "kernel is right; when they do not, the layer that differs first is where the bug lives.\n"
    "There were three ships in the harbour that morning, and the water was still. The people of "
    "the town came down to the quay to watch them leave. Some of them had brothers on board, some "
    "had sold them bread and rope, and some had only come because everyone else had come. It's "
    "a long way to the islands, and the wind doesn't always blow where you'd like it to.\n"
    "In 1984 the library had 12,500 books; by 2024 it had more than 300,000, and most of them "
    "were read at least once. Numbers, names and places: London, Paris, Tokyo, Nairobi, Lima.\n"
    "She said that they would meet again in the spring, when the roads were open and the rivers "
    "were not so high. He thought about it for a long time, and then he wrote it down, so that he "
    "would remember what she had said and where she had been standing when she said it.\n";

// Letters appended breadth first once the corpus has no pair left worth merging.
constexpr std::string_view kFillerLetters = "etaoinshrdlcumwfgypbvkjxqzETAOINSHRDLCUMWFGYPBVKJXQZ";

// Special tokens in LLaMA-3.1's order; the rest are <|reserved_special_token_N|>.
constexpr std::string_view kLeadingSpecials[] = {
    "<|begin_of_text|>", "<|end_of_text|>",      "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|eom_id|>",        "<|eot_id|>",
};
constexpr uint32_t kLeadingSpecialCount = sizeof(kLeadingSpecials) / sizeof(kLeadingSpecials[0]);

// The ordinary part of the vocabulary as raw bytes, grown one merge at a time.
class VocabBuilder {
 public:
  explicit VocabBuilder(uint32_t target) : target_(target) {
    for (int b = 0; b < 256; ++b) add_token(std::string(1, static_cast<char>(b)));
  }

  bool full() const { return tokens_.size() >= target_; }

  // Records "left right" and the merged token (which may already exist, reached another way).
  int32_t merge(int32_t left, int32_t right) {
    merges_.push_back(models::bytes_to_byte_level(tokens_[left]) + " " + models::bytes_to_byte_level(tokens_[right]));
    const std::string merged = tokens_[left] + tokens_[right];
    const auto it = id_.find(merged);
    return it != id_.end() ? it->second : add_token(merged);
  }

  void learn_from(std::string_view corpus);
  void fill_with_letter_strings();

  models::TokenizerSpec finish(uint32_t vocab_size) &&;

 private:
  int32_t add_token(std::string bytes) {
    const auto id = static_cast<int32_t>(tokens_.size());
    id_.emplace(bytes, id);
    tokens_.push_back(std::move(bytes));
    return id;
  }

  uint32_t target_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> id_;
  std::vector<std::string> merges_;
};

// Classic BPE training: merge the most frequent adjacent pair (smallest ids on a tie) over the
// pre-tokenized words until the vocabulary is full or every word is one token. Pairs seen once
// are merged too: the corpus is small, and whole words make the vocabulary behave like a real one.
void VocabBuilder::learn_from(std::string_view corpus) {
  std::map<std::string_view, int> word_counts;
  for (std::string_view w : models::split_llama3(corpus)) ++word_counts[w];
  std::vector<std::pair<std::vector<int32_t>, int>> words;
  for (const auto& [w, n] : word_counts) {
    std::vector<int32_t> ids;
    for (char c : w) ids.push_back(static_cast<unsigned char>(c));
    words.emplace_back(std::move(ids), n);
  }
  while (!full()) {
    std::map<std::pair<int32_t, int32_t>, int> pairs;
    for (const auto& [ids, n] : words) {
      for (std::size_t i = 0; i + 1 < ids.size(); ++i) pairs[{ids[i], ids[i + 1]}] += n;
    }
    auto best = pairs.end();
    for (auto it = pairs.begin(); it != pairs.end(); ++it) {
      if (best == pairs.end() || it->second > best->second) best = it;
    }
    if (best == pairs.end()) return;
    const auto [left, right] = best->first;
    const int32_t merged = merge(left, right);
    for (auto& [ids, n] : words) {
      std::vector<int32_t> out;
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const bool hit = i + 1 < ids.size() && ids[i] == left && ids[i + 1] == right;
        out.push_back(hit ? merged : ids[i]);
        if (hit) ++i;
      }
      ids = std::move(out);
    }
  }
}

// Breadth first over strings of letters (optionally after one leading space): every such token,
// in id order, extended by each letter that does not make an existing token.
void VocabBuilder::fill_with_letter_strings() {
  const auto is_word = [](std::string_view s) {
    if (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    if (s.empty()) return false;
    for (char c : s) {
      if (kFillerLetters.find(c) == std::string_view::npos) return false;
    }
    return true;
  };
  std::deque<int32_t> queue;
  queue.push_back(static_cast<unsigned char>(' '));
  for (std::size_t id = 0; id < tokens_.size(); ++id) {
    if (is_word(tokens_[id])) queue.push_back(static_cast<int32_t>(id));
  }
  while (!full() && !queue.empty()) {
    const int32_t base = queue.front();
    queue.pop_front();
    for (char letter : kFillerLetters) {
      if (full()) return;
      if (id_.count(tokens_[base] + letter)) continue;
      queue.push_back(merge(base, static_cast<unsigned char>(letter)));
    }
  }
}

models::TokenizerSpec VocabBuilder::finish(uint32_t vocab_size) && {
  models::TokenizerSpec spec;
  for (const std::string& t : tokens_) spec.tokens.push_back(models::bytes_to_byte_level(t));
  spec.token_types.assign(spec.tokens.size(), static_cast<int32_t>(models::TokenType::Normal));
  spec.merges = std::move(merges_);
  spec.bos_id = static_cast<int32_t>(spec.tokens.size());
  spec.eos_id = spec.bos_id + 1;
  for (uint32_t i = 0; spec.tokens.size() < vocab_size; ++i) {
    spec.tokens.push_back(i < kLeadingSpecialCount
                              ? std::string(kLeadingSpecials[i])
                              : "<|reserved_special_token_" + std::to_string(i - kLeadingSpecialCount + 3) + "|>");
    spec.token_types.push_back(static_cast<int32_t>(models::TokenType::Control));
  }
  return spec;
}

}  // namespace

uint32_t synthetic_special_count(uint32_t vocab_size) { return vocab_size >= 4096 ? 256 : kLeadingSpecialCount; }

models::TokenizerSpec make_synthetic_vocab(uint32_t vocab_size) {
  const uint32_t minimum = 256 + kLeadingSpecialCount;
  if (vocab_size < minimum) {
    throw std::invalid_argument("synthetic vocabulary: size " + std::to_string(vocab_size) +
                                " is too small, expected at least " + std::to_string(minimum) +
                                " (256 byte tokens and the special tokens)");
  }
  VocabBuilder builder(vocab_size - synthetic_special_count(vocab_size));
  builder.learn_from(kCorpus);
  builder.fill_with_letter_strings();
  return std::move(builder).finish(vocab_size);
}

models::TokenizerSpec make_synthetic_sentencepiece_vocab(uint32_t vocab_size) {
  models::TokenizerSpec spm = make_synthetic_vocab(vocab_size);
  spm.model = "llama";
  spm.merges.clear();
  spm.scores.assign(spm.tokens.size(), 0.0f);
  for (size_t i = 0; i < spm.tokens.size(); ++i) {
    if (spm.token_types[i] != static_cast<int32_t>(models::TokenType::Normal)) continue;
    const std::string bytes = models::byte_level_to_bytes(spm.tokens[i]);
    if (bytes.size() == 1) {
      char name[7];
      std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned char>(bytes[0]));
      spm.tokens[i] = name;
      spm.token_types[i] = static_cast<int32_t>(models::TokenType::Byte);
      continue;
    }
    spm.tokens[i] = models::spm_escape_spaces(bytes);
    spm.scores[i] = -static_cast<float>(i);
  }
  return spm;
}

}  // namespace bdsl::golden
