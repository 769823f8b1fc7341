#include "models/tokenizer/bpe.h"

#include <queue>

namespace bdsl::models {

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, -1 if none
  int32_t next;  // index of the next live symbol, -1 if none
  bool alive;
};

// A pair that could merge: ordered by rank, then by position, so that among equal ranks the
// leftmost occurrence wins ("aaa" with "a a" gives "aa a").
struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index
  int32_t left_id;
  int32_t right_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

}  // namespace

void BpeMerges::add(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  table_.try_emplace(key(left, right), Merge{rank, merged});
}

const BpeMerges::Merge* BpeMerges::find(int32_t left, int32_t right) const {
  const auto it = table_.find(key(left, right));
  return it == table_.end() ? nullptr : &it->second;
}

void BpeMerges::apply(std::vector<int32_t>& ids) const {
  if (ids.size() < 2) return;
  const auto n = static_cast<int32_t>(ids.size());
  std::vector<Symbol> symbols(ids.size());
  for (int32_t i = 0; i < n; ++i) symbols[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const int32_t right = symbols[left].next;
    if (const Merge* m = find(symbols[left].id, symbols[right].id)) {
      heap.push({m->rank, left, symbols[left].id, symbols[right].id});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    // A candidate is stale once either side has merged into something else since it was pushed.
    if (!left.alive || left.id != c.left_id || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    if (right.id != c.right_id) continue;
    left.id = find(c.left_id, c.right_id)->merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
  ids.clear();
  for (int32_t i = 0; i >= 0; i = symbols[i].next) ids.push_back(symbols[i].id);
}

}  // namespace bdsl::models
