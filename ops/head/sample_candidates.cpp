#include "ops/head/sample_candidates.h"

#include <bit>
#include <cmath>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ops/common/matrix_support.h"
#include "ops/common/step_state.h"
#include "ops/head/draw_support.h"
#include "ops/head/argmax.h"
#include "ops/head/top_k.h"
#include "ops/head/window_sort.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

std::array<uint32_t, kSampleParamsWords> SampleParams::pack() const {
  return {std::bit_cast<uint32_t>(inverse_temperature), top_k, std::bit_cast<uint32_t>(top_p),
          std::bit_cast<uint32_t>(min_p), uint32_t(seed), uint32_t(seed >> 32), counter, 0};
}

namespace {

Expr<u32> rows_needed(Expr<f32> inverse_temperature, Expr<u32> top_k, uint32_t k) {
  auto wanted = select(top_k > 0u, min(top_k, constant<u32>(k)), constant<u32>(k));
  return let("rows_needed", select(inverse_temperature == 0.0f, constant<u32>(1u), wanted));
}

// One draw from candidates [0, k) sorted descending (value(i), index(i)), by the whole workgroup
// of `wg` invocations; param(w) reads word w of the row's SampleParams. Returns the chosen
// candidate's position, the same in every invocation.
Expr<u32> emit_draw(KernelBuilder& kb, uint32_t wg, uint32_t k, const std::function<Expr<f32>(Expr<u32>)>& value,
                    const std::function<Expr<u32>(Expr<u32>)>& index, const std::function<Expr<u32>(uint32_t)>& param,
                    Expr<u32> counter) {
  auto weights = kb.shared<f32>("weights", k);
  auto kept = kb.shared<u32>("kept", 1);
  auto inverse_temperature = let("inverse_temperature", bitcast<f32>(param(0)));
  auto top_k = let("top_k", param(1));
  auto top_p = let("top_p", bitcast<f32>(param(2)));
  auto min_p = let("min_p", bitcast<f32>(param(3)));
  auto best = let("best", value(constant<u32>(0u)));

  for_range(kb.local_index(), k, wg, [&](Expr<u32> i) { weights[i] = exp(value(i) - best); }, "i");
  barrier();
  // The cut, by one invocation: the sums run in the order the CPU twin runs them. It starts from
  // the rows the draw can take at all (the pruned head lists at least those).
  if_(kb.local_index() == 0u, [&] {
    auto n = kb.var<u32>("n", rows_needed(inverse_temperature, top_k, k));
    if_(top_p < 1.0f, [&] {
      auto total = kb.var<f32>("total", 0.0f);
      for_range(0u, Expr<u32>(n), [&](Expr<u32> i) { total = let_precise("sum", total + weights[i]); }, "i");
      auto goal = let_precise("goal", top_p * total);
      auto mass = kb.var<f32>("mass", 0.0f);
      auto m = kb.var<u32>("m", 0u);
      while_([&] { return Expr<u32>(m) < Expr<u32>(n) && Expr<f32>(mass) < goal; }, [&] {
        mass = let_precise("grown", mass + weights[Expr<u32>(m)]);
        m = Expr<u32>(m) + 1u;
      });
      n = max(Expr<u32>(m), constant<u32>(1u));
    });
    if_(min_p > 0.0f, [&] {
      auto floor_value = let_precise("floor_value", best + log(min_p));
      auto m = kb.var<u32>("m_min_p", 1u);
      while_([&] { return Expr<u32>(m) < Expr<u32>(n) && value(Expr<u32>(m)) >= floor_value; },
             [&] { m = Expr<u32>(m) + 1u; });
      n = Expr<u32>(m);
    });
    kept[0u] = n;
  });
  barrier();
  auto n = let("kept_n", Expr<u32>(kept[0u]));
  auto seed_low = let("seed_low", param(4));
  auto seed_high = let("seed_high", param(5));
  auto own_v = kb.var<f32>("own_score", -INFINITY);
  auto own_i = kb.var<u32>("own_index", kArgmaxNone);
  for_range(kb.local_index(), Expr<u32>(n), constant<u32>(wg), [&](Expr<u32> i) {
    auto score = gumbel_score(value(i), best, inverse_temperature, let("id", index(i)), counter, seed_low, seed_high);
    if_(argmax_beats(score, i, own_v, own_i), [&] {
      own_v = score;
      own_i = i;
    });
  }, "i");
  auto [score, winner] = workgroup_argmax_combine(kb, wg, own_v, own_i);
  (void)score;
  return winner;
}

}  // namespace

Kernel sample_candidates(const OpTarget& target, uint32_t k, bool rows, uint32_t advance_context) {
  if (k == 0 || k > kMaxTopK)
    throw std::invalid_argument("sample_candidates: k " + std::to_string(k) + " must be in 1.." + std::to_string(kMaxTopK));
  if (rows && advance_context) throw std::invalid_argument("sample_candidates: rows advance no step state");
  const uint32_t wg = subgroup_multiple_workgroup(target, kMaxTopK);
  const std::string suffix = advance_context ? "_advance" : rows ? "_rows" : "";
  KernelBuilder kb("sample_candidates_k" + std::to_string(k) + suffix, {wg, 1, 1});
  auto values = kb.buffer<f32>("top_values", Access::Read);
  auto indices = kb.buffer<u32>("top_indices", Access::Read);
  auto params = kb.buffer<u32>("params", Access::Read);
  auto token = kb.buffer<u32>("token", Access::Write);
  auto advance = declare_advance(kb, advance_context);
  auto& step = advance.first;
  auto& generated = advance.second;
  Expr<u32> row = rows ? let("row", kb.workgroup_id().y()) : constant<u32>(0u);
  auto first = let("first", row * k);
  auto param = [&](uint32_t word) { return Expr<u32>(params[row * kSampleParamsWords + word]); };
  Expr<u32> counter = advance_context ? let("counter", Expr<u32>((*step)[kStepPos]) + 1u) : param(6);
  auto winner = emit_draw(
      kb, wg, k, [&](Expr<u32> i) { return Expr<f32>(values[first + i]); },
      [&](Expr<u32> i) { return Expr<u32>(indices[first + i]); }, param, counter);
  if_(kb.local_index() == 0u, [&] {
    auto chosen = let("chosen", Expr<u32>(indices[first + winner]));
    token[row] = chosen;
    if (advance_context) advance_step(*step, *generated, advance_context, chosen);
  });
  return kb.build();
}

Expr<u32> sample_rows_needed(const Buffer<u32>& params, uint32_t k, std::optional<Expr<u32>> row) {
  const Expr<u32> first = row ? *row * kSampleParamsWords : constant<u32>(0u);
  return rows_needed(bitcast<f32>(Expr<u32>(params[first])), Expr<u32>(params[first + 1u]), k);
}

SampleListPlan sample_list_plan(const OpTarget& target, uint32_t k) {
  if (k == 0 || k > kMaxTopK)
    throw std::invalid_argument("sample_candidate_list: k " + std::to_string(k) + " must be in 1.." + std::to_string(kMaxTopK));
  SampleListPlan p;
  // 256: the short window's passes have at most 128 pairs; more invocations only make each
  // barrier dearer (1,024 took 74 us a draw on the H100, bench/RESULTS.md run 16).
  p.workgroup = subgroup_multiple_workgroup(target, 256);
  p.shares = std::min(p.workgroup, 2 * kMaxTopK);
  // Shared memory: the window's pairs; besides them the draw's k weights, the threshold's ranked
  // maxima, the argmax combine's pairs and a few words.
  const uint32_t besides = 4 * k + 4 * std::min(p.workgroup, 2 * kMaxTopK) + 8 * p.workgroup + 256;
  if (target.max_shared_bytes < besides + 16 * k)
    throw std::invalid_argument("sample_candidate_list: " + std::to_string(target.max_shared_bytes) +
                                " bytes of shared memory cannot hold a window of 2k pairs");
  const uint32_t room = (target.max_shared_bytes - besides) / 8;
  p.large_window = std::bit_floor(std::min<uint32_t>(2048, room));
  p.small_window = std::min(p.large_window, std::max<uint32_t>(128, std::bit_ceil(2 * k)));
  if (p.small_window < 2 * k)
    throw std::invalid_argument("sample_candidate_list: " + std::to_string(target.max_shared_bytes) +
                                " bytes of shared memory cannot hold a window of 2k pairs");
  return p;
}

namespace {

// sample_candidate_list, or with rows its batch form (a grid row per list).
Kernel candidate_list_draw(const OpTarget& target, uint32_t k, uint32_t advance_context, std::optional<EmbeddingShape> embed_next,
                           bool rows) {
  if (embed_next && !advance_context) throw std::invalid_argument("sample_candidate_list: embed_next needs advance_context");
  if (rows && advance_context) throw std::invalid_argument("sample_candidate_list_rows: rows advance no step state");
  const SampleListPlan p = sample_list_plan(target, k);
  const uint32_t wg = p.workgroup;
  KernelBuilder kb("sample_candidate_list_k" + std::to_string(k) + (advance_context ? "_advance" : "") + (embed_next ? "_embed" : "") +
                       (rows ? "_rows" : ""),
                   {wg, 1, 1});
  auto list_values = kb.buffer<f32>("list_values", Access::Read);
  auto list_indices = kb.buffer<u32>("list_indices", Access::Read);
  auto list_count = kb.buffer<u32>("list_count", Access::ReadWrite);
  auto params = kb.buffer<u32>("params", Access::Read);
  auto top_values = kb.buffer<f32>("top_values", Access::Write);
  auto top_indices = kb.buffer<u32>("top_indices", Access::Write);
  auto token = kb.buffer<u32>("token", Access::Write);
  auto list_length = kb.buffer<u32>("list_length", Access::Write);
  std::optional<Buffer<u32>> best;
  if (rows) best = kb.buffer<u32>("best", Access::Write);
  auto advance = declare_advance(kb, advance_context);
  auto& step = advance.first;
  auto& generated = advance.second;
  std::optional<NextEmbedding> next_embedding;
  if (embed_next) next_embedding = declare_next_embedding(kb, *embed_next);
  // Rows: row y's list at y * stride, its count, settings and outputs at y.
  std::optional<Expr<u32>> row;
  Expr<u32> row_at = constant<u32>(0u), list_at = constant<u32>(0u), top_at = constant<u32>(0u);
  if (rows) {
    row = let("row", kb.workgroup_id().y());
    row_at = *row;
    list_at = let("list_at", *row * kb.push<u32>("stride"));
    top_at = let("top_at", *row * k);
  }
  auto sv = kb.shared<f32>("window_values", p.large_window);
  auto si = kb.shared<u32>("window_indices", p.large_window);
  auto count = kb.broadcast("count", Expr<u32>(list_count[row_at]));
  if_(kb.local_index() == 0u, [&] {
    list_length[row_at] = count;
    list_count[row_at] = 0u;  // empty for the next replay's list
  });
  auto value = [&](Expr<u32> j) { return Expr<f32>(list_values[list_at + j]); };
  auto index = [&](Expr<u32> j) { return Expr<u32>(list_indices[list_at + j]); };
  // T: the k'-th largest of the first p.shares invocations' maxima over their shares of the list.
  auto own_max = kb.var<f32>("own_max", -INFINITY);
  for_range(kb.local_index(), count, constant<u32>(p.shares), [&](Expr<u32> j) { own_max = max(Expr<f32>(own_max), value(j)); }, "j");
  auto floor_t = select_kth_largest(kb, wg, p.shares, own_max, sample_rows_needed(params, k, row));
  // The candidates at or above T into the short window (padding first), counted.
  auto kept = kb.shared<u32>("kept_count", 1);
  fill_window(kb, sv, si, 0, p.small_window, wg, constant<u32>(0u), constant<u32>(0u), value, index);
  if_(kb.local_index() == 0u, [&] { kept[0u] = 0u; });
  barrier();
  for_range(kb.local_index(), count, constant<u32>(wg), [&](Expr<u32> j) {
    auto v = let("v", value(j));
    if_(v >= floor_t, [&] {
      auto at = let("at", atomic_add(kept[0u], 1u));
      if_(at < p.small_window, [&] {
        sv[at] = v;
        si[at] = index(j);
      });
    });
  }, "j");
  barrier();
  auto n_kept = kb.broadcast("n_kept", Expr<u32>(kept[0u]));
  // Usually they fit: one short sort. Else the whole list, in the smallest window it fits or in
  // the large window's rounds.
  std::function<void(uint32_t)> sort_list_from = [&](uint32_t window) {
    if (window >= p.large_window) return window_top_k(kb, sv, si, p.large_window, k, wg, count, value, index);
    if_(count <= window, [&] { window_top_k(kb, sv, si, window, k, wg, count, value, index); }).else_([&] { sort_list_from(window * 2); });
  };
  if_(n_kept <= p.small_window, [&] { bitonic_sort(kb, sv, si, p.small_window, wg); }).else_([&] { sort_list_from(p.small_window); });
  for_range(kb.local_index(), k, wg, [&](Expr<u32> r) {
    top_values[top_at + r] = sv[r];
    top_indices[top_at + r] = si[r];
  }, "r");
  auto param = [&](uint32_t word) { return Expr<u32>(params[row_at * kSampleParamsWords + word]); };
  Expr<u32> counter = advance_context ? let("counter", Expr<u32>((*step)[kStepPos]) + 1u) : param(6);
  auto winner = emit_draw(
      kb, wg, k, [&](Expr<u32> i) { return Expr<f32>(sv[i]); }, [&](Expr<u32> i) { return Expr<u32>(si[i]); }, param,
      counter);
  // An empty list (no finite logit: NaN from the layers) would pick the padding's id: token 0
  // instead, never an id outside the vocabulary.
  auto picked = let("picked", Expr<u32>(si[winner]));
  auto chosen = let("chosen", select(picked == kWindowNone, constant<u32>(0u), picked));
  if_(kb.local_index() == 0u, [&] {
    token[row_at] = chosen;
    // The list's best: the argmax of the row's logits (its first candidate, lowest id on ties).
    if (best) (*best)[row_at] = select(Expr<u32>(si[0u]) == kWindowNone, constant<u32>(0u), Expr<u32>(si[0u]));
    if (advance_context) advance_step(*step, *generated, advance_context, chosen);
  });
  if (embed_next) emit_embedding_row(kb, wg, *embed_next, next_embedding->table, chosen, next_embedding->x_next);
  return kb.build();
}

}  // namespace

Kernel sample_candidate_list(const OpTarget& target, uint32_t k, uint32_t advance_context,
                             std::optional<EmbeddingShape> embed_next) {
  return candidate_list_draw(target, k, advance_context, embed_next, false);
}

Kernel sample_candidate_list_rows(const OpTarget& target, uint32_t k) { return candidate_list_draw(target, k, 0, std::nullopt, true); }

Plan plan_sample_candidates(const OpTarget& target, uint32_t k, bool rows, uint32_t advance_context) {
  return {sample_candidates(target, k, rows, advance_context), [](uint32_t count) { return rt::Grid{1, count}; }};
}

Plan plan_sample_candidate_list(const OpTarget& target, uint32_t k, uint32_t advance_context,
                                std::optional<EmbeddingShape> embed_next) {
  return {sample_candidate_list(target, k, advance_context, embed_next), fixed_grid({1})};
}

Plan plan_sample_candidate_list_rows(const OpTarget& target, uint32_t k) {
  return {sample_candidate_list_rows(target, k), [](uint32_t count) { return rt::Grid{1, count}; }};
}

}  // namespace bdsl::ops
