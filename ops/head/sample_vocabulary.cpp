#include "ops/head/sample_vocabulary.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "ops/common/matrix_support.h"
#include "ops/common/step_state.h"
#include "ops/head/argmax.h"
#include "ops/head/draw_support.h"
#include "ops/head/sample_candidates.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr uint32_t kWorkgroup = 256;
constexpr uint32_t kPerInvocation = 4;  // tokens an invocation takes in a pass or the draw
constexpr uint32_t kShift[kVocabPasses] = {21, 10, 0};
constexpr uint32_t kBits[kVocabPasses] = {11, 11, 10};
// State words of a row.
constexpr uint32_t kPrefix = 0, kAboveLow = 1, kAboveHigh = 2, kGoalLow = 3, kGoalHigh = 4;

// An unsigned 64-bit integer as two u32 words: the device needs no 64-bit support.
struct Wide {
  Expr<u32> lo, hi;
};
Wide add(const Wide& a, const Wide& b) {
  auto lo = let("sum_lo", a.lo + b.lo);
  return {lo, let("sum_hi", a.hi + b.hi + select(lo < a.lo, constant<u32>(1u), constant<u32>(0u)))};
}
Expr<boolean> at_least(const Wide& a, const Wide& b) { return a.hi > b.hi || (a.hi == b.hi && a.lo >= b.lo); }
// a * b in full, from 16-bit halves.
Wide multiply(Expr<u32> a, Expr<u32> b) {
  auto a0 = let("a0", a & 0xffffu), a1 = let("a1", a >> 16u), b0 = let("b0", b & 0xffffu), b1 = let("b1", b >> 16u);
  auto p00 = let("p00", a0 * b0), p01 = let("p01", a0 * b1), p10 = let("p10", a1 * b0), p11 = let("p11", a1 * b1);
  auto mid = let("mid", (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu));
  return {let("product_lo", (p00 & 0xffffu) | (mid << 16u)),
          let("product_hi", p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u))};
}

// The logit's f32 bits as a u32 of the same order (-0 as +0).
Expr<u32> order_key(Expr<f32> l) {
  auto bits = let("bits", select(l == 0.0f, constant<u32>(0u), bitcast<u32>(l)));
  return let("key", select((bits & 0x80000000u) != 0u, bits ^ 0xffffffffu, bits | 0x80000000u));
}

// A token's weight: floor(min(exp(l - best), 1) * 2^31).
Expr<u32> weight(Expr<f32> l, Expr<f32> best) {
  auto e = let("e", min(exp(let_precise("below_best", l - best)), constant<f32>(1.0f)));
  return let("w", cast<u32>(let_precise("scaled_weight", e * 2147483648.0f)));
}

// The row's settings and its best logit, as every kernel of a row reads them.
struct Row {
  Expr<u32> row;
  std::function<Expr<u32>(uint32_t)> param;
};
Row row_of(KernelBuilder& kb, const Buffer<u32>& params) {
  auto row = let("row", kb.workgroup_id().y());
  return {row, [params, row](uint32_t w) { return Expr<u32>(params[row * kSampleParamsWords + w]); }};
}
// Whether the row draws over the vocabulary: sampling (inverse temperature > 0) with top_k 0.
// Other rows are left alone (a greedy row's or a top-k row's token comes from elsewhere).
Expr<boolean> draws_over_vocabulary(const Row& r) { return bitcast<f32>(r.param(0)) != 0.0f && r.param(1) == 0u; }
// Whether it also cuts by top-p.
Expr<boolean> cuts_by_top_p(const Row& r) { return draws_over_vocabulary(r) && bitcast<f32>(r.param(2)) < 1.0f; }

void check_pass(uint32_t pass) {
  if (pass >= kVocabPasses) throw std::invalid_argument("vocab sampling: pass " + std::to_string(pass) + " of 0..2");
}

}  // namespace

uint32_t vocab_sampling_groups(const OpTarget&, uint32_t vocab) {
  return (vocab + kWorkgroup * kPerInvocation - 1) / (kWorkgroup * kPerInvocation);
}

Kernel vocab_mass_histogram(const OpTarget& target, uint32_t vocab, uint32_t pass) {
  check_pass(pass);
  (void)target;
  const uint32_t buckets = 1u << kBits[pass];
  KernelBuilder kb("vocab_mass_histogram_" + std::to_string(pass), {kWorkgroup, 1, 1});
  auto logits = kb.buffer<f32>("logits", Access::Read);
  auto best_token = kb.buffer<u32>("best", Access::Read);
  auto params = kb.buffer<u32>("params", Access::Read);
  auto state = kb.buffer<u32>("state", Access::Read);
  auto mass = kb.buffer<u32>("mass", Access::ReadWrite);
  auto stride = kb.push<u32>("stride");
  auto lo = kb.shared<u32>("mass_lo", buckets);
  auto hi = kb.shared<u32>("mass_hi", buckets);
  const Row r = row_of(kb, params);
  auto first = let("first", r.row * stride);
  if_(cuts_by_top_p(r), [&] {  // the same in the whole workgroup: its row's settings
    for_range(kb.local_index(), buckets, kWorkgroup, [&](Expr<u32> b) {
      lo[b] = 0u;
      hi[b] = 0u;
    }, "b");
    barrier();
    auto best = let("best_logit", Expr<f32>(logits[first + Expr<u32>(best_token[r.row])]));
    auto prefix = let("prefix", Expr<u32>(state[r.row * kVocabStateWords + kPrefix]));
    auto start = let("start", kb.workgroup_id().x() * (kWorkgroup * kPerInvocation));
    for_range(0u, kPerInvocation, [&](Expr<u32> j) {
      auto i = let("i", start + j * kWorkgroup + kb.local_index());
      if_(i < vocab, [&] {
        auto l = let("l", Expr<f32>(logits[first + i]));
        auto key = order_key(l);
        auto matches = pass == 0 ? constant<boolean>(true) : (key >> (kShift[pass] + kBits[pass])) == prefix;
        auto w = weight(l, best);
        if_(matches && w != 0u, [&] {
          auto d = let("d", (key >> kShift[pass]) & (buckets - 1));
          auto old = let("old", atomic_add(lo[d], w));
          if_(old + w < old, [&] { atomic_add(hi[d], 1u); });
        });
      });
    }, "j");
    barrier();
    auto base = let("base", r.row * (2 * kVocabBuckets));
    for_range(kb.local_index(), buckets, kWorkgroup, [&](Expr<u32> b) {
      auto l = let("l", Expr<u32>(lo[b]));
      auto h = let("h", Expr<u32>(hi[b]));
      if_((l | h) != 0u, [&] {
        auto old = let("old", atomic_add(mass[base + 2u * b], l));
        auto carried = let("carried", h + select(old + l < old, constant<u32>(1u), constant<u32>(0u)));
        if_(carried != 0u, [&] { atomic_add(mass[base + 2u * b + 1u], carried); });
      });
    }, "b");
  });
  return kb.build();
}

Kernel vocab_mass_select(const OpTarget& target, uint32_t pass) {
  check_pass(pass);
  (void)target;
  const uint32_t buckets = 1u << kBits[pass];
  const uint32_t per = buckets / kWorkgroup;  // buckets an invocation walks, from the top down
  KernelBuilder kb("vocab_mass_select_" + std::to_string(pass), {kWorkgroup, 1, 1});
  auto params = kb.buffer<u32>("params", Access::Read);
  auto mass = kb.buffer<u32>("mass", Access::ReadWrite);
  auto state = kb.buffer<u32>("state", Access::ReadWrite);
  auto run_lo = kb.shared<u32>("run_lo", kWorkgroup);
  auto run_hi = kb.shared<u32>("run_hi", kWorkgroup);
  const Row r = row_of(kb, params);
  auto s = let("s", r.row * kVocabStateWords);
  auto base = let("base", r.row * (2 * kVocabBuckets));
  auto bucket = [&](Expr<u32> t) { return let("bucket", constant<u32>(buckets - 1) - (kb.local_index() * per + t)); };
  auto mass_of = [&](Expr<u32> b) { return Wide{Expr<u32>(mass[base + 2u * b]), Expr<u32>(mass[base + 2u * b + 1u])}; };
  if_(cuts_by_top_p(r), [&] {
    // This invocation's share of the mass, then each share's running total from the top.
    auto own_lo = kb.var<u32>("own_lo", 0u);
    auto own_hi = kb.var<u32>("own_hi", 0u);
    for_range(0u, per, [&](Expr<u32> t) {
      auto sum = add({own_lo, own_hi}, mass_of(bucket(t)));
      own_lo = sum.lo;
      own_hi = sum.hi;
    }, "t");
    auto li = kb.local_index();
    run_lo[li] = Expr<u32>(own_lo);
    run_hi[li] = Expr<u32>(own_hi);
    barrier();
    // Inclusive running totals from the top, in log2(workgroup) rounds (Hillis-Steele); integers,
    // so the order of the additions does not matter.
    auto inc_lo = kb.var<u32>("inc_lo", own_lo);
    auto inc_hi = kb.var<u32>("inc_hi", own_hi);
    for (uint32_t d = 1; d < kWorkgroup; d *= 2) {
      auto take = let("take", li >= d);
      auto from = let("from", select(take, li - d, li));
      auto zero = constant<u32>(0u);
      const Wide grown = add({inc_lo, inc_hi}, {let("add_lo", select(take, Expr<u32>(run_lo[from]), zero)),
                                                 let("add_hi", select(take, Expr<u32>(run_hi[from]), zero))});
      barrier();
      run_lo[li] = grown.lo;
      run_hi[li] = grown.hi;
      inc_lo = grown.lo;
      inc_hi = grown.hi;
      barrier();
    }
    // The mass above this pass's buckets and the goal: from the state, or at the first pass from
    // the whole vocabulary's weight (every invocation computes the same).
    Wide above{constant<u32>(0u), constant<u32>(0u)}, goal = above;
    if (pass == 0) {
      const Wide total{let("total_lo", Expr<u32>(run_lo[kWorkgroup - 1])), let("total_hi", Expr<u32>(run_hi[kWorkgroup - 1]))};
      auto p = let("p", cast<u32>(let_precise("p_scaled", bitcast<f32>(r.param(2)) * 4294967296.0f)));
      const Wide low = multiply(p, total.lo), high = multiply(p, total.hi);
      // ceil(p * total / 2^32) = p * hi + high word of p * lo, + 1 if its low word is not 0.
      auto extra = let("extra", low.hi + select(low.lo != 0u, constant<u32>(1u), constant<u32>(0u)));
      goal = add(high, {extra, select(extra < low.hi, constant<u32>(1u), constant<u32>(0u))});
      if_(li == 0u, [&] {
        state[s + kGoalLow] = goal.lo;
        state[s + kGoalHigh] = goal.hi;
      });
    } else {
      goal = {let("goal_lo", Expr<u32>(state[s + kGoalLow])), let("goal_hi", Expr<u32>(state[s + kGoalHigh]))};
      above = {let("above_lo", Expr<u32>(state[s + kAboveLow])), let("above_hi", Expr<u32>(state[s + kAboveHigh]))};
    }
    auto first = let("first_share", li == 0u);
    auto prev = let("prev", select(first, li, li - 1u));
    const Wide before = add(above, {let("excl_lo", select(first, constant<u32>(0u), Expr<u32>(run_lo[prev]))),
                                    let("excl_hi", select(first, constant<u32>(0u), Expr<u32>(run_hi[prev])))});
    const Wide after = add(before, {own_lo, own_hi});
    // The one invocation whose buckets hold the crossing walks them down to the bucket where the
    // running total first reaches the goal.
    if_(!at_least(before, goal) && at_least(after, goal), [&] {
      auto cum_lo = kb.var<u32>("cum_lo", before.lo);
      auto cum_hi = kb.var<u32>("cum_hi", before.hi);
      auto found = kb.var<boolean>("found", false);
      for_range(0u, per, [&](Expr<u32> t) {
        auto b = bucket(t);
        const Wide next = add({cum_lo, cum_hi}, mass_of(b));
        if_(!Expr<boolean>(found), [&] {
          if_(at_least(next, goal), [&] {
            found = true;
            auto prefix = pass == 0 ? Expr<u32>(b) : let("prefix", (Expr<u32>(state[s + kPrefix]) << kBits[pass]) | b);
            state[s + kPrefix] = prefix;
            state[s + kAboveLow] = Expr<u32>(cum_lo);
            state[s + kAboveHigh] = Expr<u32>(cum_hi);
          }).else_([&] {
            cum_lo = next.lo;
            cum_hi = next.hi;
          });
        });
      }, "t");
    });
    // Every invocation has read its own buckets only: it leaves them zero for the next pass.
    for_range(0u, per, [&](Expr<u32> t) {
      auto b = bucket(t);
      mass[base + 2u * b] = 0u;
      mass[base + 2u * b + 1u] = 0u;
    }, "t");
  });
  return kb.build();
}

Kernel vocab_draw_partial(const OpTarget& target, uint32_t vocab, bool step_counter) {
  (void)target;
  KernelBuilder kb(std::string("vocab_draw_partial") + (step_counter ? "_step" : ""), {kWorkgroup, 1, 1});
  auto logits = kb.buffer<f32>("logits", Access::Read);
  auto best_token = kb.buffer<u32>("best", Access::Read);
  auto params = kb.buffer<u32>("params", Access::Read);
  auto state = kb.buffer<u32>("state", Access::Read);
  auto part_values = kb.buffer<f32>("part_values", Access::Write);
  auto part_indices = kb.buffer<u32>("part_indices", Access::Write);
  std::optional<Buffer<u32>> step;
  if (step_counter) step = kb.buffer<u32>("step", Access::Read);
  auto stride = kb.push<u32>("stride");
  const Row r = row_of(kb, params);
  auto first = let("first", r.row * stride);
  auto inverse_temperature = let("inverse_temperature", bitcast<f32>(r.param(0)));
  auto min_p = let("min_p", bitcast<f32>(r.param(3)));
  auto seed_low = let("seed_low", r.param(4));
  auto seed_high = let("seed_high", r.param(5));
  Expr<u32> counter = step ? let("counter", Expr<u32>((*step)[kStepPos]) + 1u) : let("counter", r.param(6));
  if_(draws_over_vocabulary(r), [&] {  // the same in the whole workgroup: its row's settings
    auto best = let("best_logit", Expr<f32>(logits[first + Expr<u32>(best_token[r.row])]));
    auto cut = let("cut", bitcast<f32>(r.param(2)) < 1.0f);
    auto threshold = let("threshold", Expr<u32>(state[r.row * kVocabStateWords + kPrefix]));
    auto floor_value = let_precise("floor_value", best + log(min_p));
    auto own_v = kb.var<f32>("own_score", -INFINITY);
    auto own_i = kb.var<u32>("own_index", kArgmaxNone);
    auto start = let("start", kb.workgroup_id().x() * (kWorkgroup * kPerInvocation));
    for_range(0u, kPerInvocation, [&](Expr<u32> j) {
      auto i = let("i", start + j * kWorkgroup + kb.local_index());
      if_(i < vocab, [&] {
        auto l = let("l", Expr<f32>(logits[first + i]));
        auto kept = let("kept", (!cut || order_key(l) >= threshold) && (min_p == 0.0f || l >= floor_value));
        if_(kept, [&] {
          auto score = gumbel_score(l, best, inverse_temperature, i, counter, seed_low, seed_high);
          if_(argmax_beats(score, i, own_v, own_i), [&] {
            own_v = score;
            own_i = i;
          });
        });
      });
    }, "j");
    auto [v, winner] = workgroup_argmax_combine(kb, kWorkgroup, own_v, own_i);
    if_(kb.local_index() == 0u, [&] {
      auto at = let("at", r.row * vocab_sampling_groups(target, vocab) + kb.workgroup_id().x());
      part_values[at] = v;
      part_indices[at] = winner;
    });
  });
  return kb.build();
}

Kernel vocab_draw_final(const OpTarget& target, uint32_t vocab, uint32_t advance_context,
                        std::optional<EmbeddingShape> embed_next) {
  if (embed_next && !advance_context) throw std::invalid_argument("vocab_draw_final: embed_next needs advance_context");
  const uint32_t groups = vocab_sampling_groups(target, vocab);
  const uint32_t wg = subgroup_multiple_workgroup(target, 256);
  KernelBuilder kb(std::string("vocab_draw_final") + (advance_context ? "_advance" : "") + (embed_next ? "_embed" : ""), {wg, 1, 1});
  auto part_values = kb.buffer<f32>("part_values", Access::Read);
  auto part_indices = kb.buffer<u32>("part_indices", Access::Read);
  auto params = kb.buffer<u32>("params", Access::Read);
  auto token = kb.buffer<u32>("token", Access::Write);
  auto advance = declare_advance(kb, advance_context);
  std::optional<NextEmbedding> next_embedding;
  if (embed_next) next_embedding = declare_next_embedding(kb, *embed_next);
  const Row r = row_of(kb, params);
  if_(draws_over_vocabulary(r), [&] {
    auto first = let("first_part", r.row * groups);
    auto [v, winner] = workgroup_argmax(kb, wg, constant<u32>(0u), constant<u32>(groups),
                                        [&](Expr<u32> g) { return Expr<f32>(part_values[first + g]); },
                                        [&](Expr<u32> g) { return Expr<u32>(part_indices[first + g]); });
    (void)v;
    // Nothing kept (no finite logit: NaN from the layers) would leave no winner: token 0 instead,
    // never an id outside the vocabulary.
    auto chosen = let("chosen", select(winner == kArgmaxNone, constant<u32>(0u), winner));
    if_(kb.local_index() == 0u, [&] {
      token[r.row] = chosen;
      if (advance_context) advance_step(*advance.first, *advance.second, advance_context, chosen);
    });
    if (embed_next) emit_embedding_row(kb, wg, *embed_next, next_embedding->table, chosen, next_embedding->x_next);
  });
  return kb.build();
}

Plan plan_vocab_mass_histogram(const OpTarget& target, uint32_t vocab, uint32_t pass) {
  const uint32_t groups = vocab_sampling_groups(target, vocab);
  return {vocab_mass_histogram(target, vocab, pass), [groups](uint32_t rows) { return rt::Grid{groups, rows}; }};
}
Plan plan_vocab_mass_select(const OpTarget& target, uint32_t pass) {
  return {vocab_mass_select(target, pass), [](uint32_t rows) { return rt::Grid{1, rows}; }};
}
Plan plan_vocab_draw_partial(const OpTarget& target, uint32_t vocab, bool step_counter) {
  const uint32_t groups = vocab_sampling_groups(target, vocab);
  return {vocab_draw_partial(target, vocab, step_counter), [groups](uint32_t rows) { return rt::Grid{groups, rows}; }};
}
Plan plan_vocab_draw_final(const OpTarget& target, uint32_t vocab, uint32_t advance_context,
                           std::optional<EmbeddingShape> embed_next) {
  return {vocab_draw_final(target, vocab, advance_context, embed_next), [](uint32_t rows) { return rt::Grid{1, rows}; }};
}

}  // namespace bdsl::ops
