// Byte-pair merging over token ids: the merge list, ranked by position, applied to one
// pre-tokenized word lowest rank first (leftmost first among equal ranks), exactly as GPT-2 and
// Hugging Face `tokenizers` do. A heap of candidate pairs over a linked list of symbols makes a
// word of n symbols cost O(n log n), so one very long word cannot stall the tokenizer.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace bdsl::models {

class BpeMerges {
 public:
  // Registers "left right -> merged" with the given rank (lower merges first). A pair seen twice
  // keeps its first (lowest) rank.
  void add(int32_t left, int32_t right, int32_t merged, int32_t rank);
  std::size_t size() const { return table_.size(); }

  // Rewrites `ids` (one word, initially one token per byte) into its merged tokens.
  void apply(std::vector<int32_t>& ids) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t key(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  const Merge* find(int32_t left, int32_t right) const;

  std::unordered_map<uint64_t, Merge> table_;
};

}  // namespace bdsl::models
