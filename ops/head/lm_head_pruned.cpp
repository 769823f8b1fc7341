#include "ops/head/lm_head_pruned.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/embedding_lookup.h"
#include "ops/common/handoff.h"
#include "ops/common/matrix_support.h"
#include "ops/common/rms_norm.h"
#include "ops/head/argmax.h"
#include "ops/head/lm_head.h"
#include "ops/head/sample_candidates.h"
#include "ops/head/top_k.h"
#include "ops/head/window_sort.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {
// Rows per subgroup of lm_head_bounds. With x quantized by lm_head_input the pass starts with its
// dot products, and more, lighter workgroups keep more of the table in flight (bench/RESULTS.md, "Behind the code").
constexpr uint32_t kRowsPerSubgroup = 2;
// Rows whose shadow loads a subgroup issues before their arithmetic (one table part only;
// bench/RESULTS.md, "Behind the code").
constexpr uint32_t kRowsAtOnce = 2;

// Element i of row `row` (of row_size elements) where a batch's row is given, else i itself: the
// single row's kernels keep their indices as they were.
Expr<u32> in_row(const std::optional<Expr<u32>>& row, Expr<u32> i, uint32_t row_size) { return row ? *row * row_size + i : i; }

void check(uint32_t vocab, uint32_t dim) {
  if (vocab == 0) throw std::invalid_argument("lm_head_pruned: empty vocabulary");
  if (!lm_head_pruned_supported(dim))
    throw std::invalid_argument("lm_head_pruned: dim " + std::to_string(dim) + " is not a multiple of 16");
}
}  // namespace

bool lm_head_pruned_supported(uint32_t dim) { return dim > 0 && dim % 16 == 0; }

LmHeadRowBound lm_head_row_bound(Expr<i32> dot, Expr<f32> row_scale, Expr<vec2> row_bound, Expr<f32> sx, Expr<f32> norm,
                                 Expr<f32> residual_norm) {
  auto approx = let("approx", (cast<f32>(dot) * row_scale) * sx);
  auto margin = let("margin", row_bound.x() * norm + row_bound.y() * residual_norm + abs(approx) * 1e-6f);
  return {approx, margin};
}

uint32_t lm_head_bounds_workgroups(const OpTarget& target, uint32_t vocab) {
  return ceil_div(vocab, rows_per_workgroup(target, lm_head_workgroup(target)) * kRowsPerSubgroup);
}

// sum over four byte pairs of signed a * b.
Expr<i32> byte_dot(const Expr<u32>& a, const Expr<u32>& b, bool packed) {
  if (packed) return sdot4x8(a, b);
  auto sa = bitcast<i32>(a), sb = bitcast<i32>(b);
  auto term = [&](int j) { return bitfield_extract(sa, 8 * j, 8) * bitfield_extract(sb, 8 * j, 8); };
  return (term(0) + term(1)) + (term(2) + term(3));
}

Kernel lm_head_input(const OpTarget& target, uint32_t dim, bool rows) {
  if (!lm_head_pruned_supported(dim))
    throw std::invalid_argument("lm_head_input: dim " + std::to_string(dim) + " is not a multiple of 16");
  const uint32_t wg = rms_norm_workgroup(target);
  KernelBuilder k("lm_head_input_" + std::to_string(dim) + (rows ? "_rows" : ""), {wg, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto weight = k.buffer<f32>("weight", Access::Read);
  auto xn = k.buffer<f32>("xn", Access::Write);
  auto xq = k.buffer<u32>("xq", Access::Write);
  auto stats = k.buffer<f32>("stats", Access::Write);
  auto eps = k.push<f32>("eps");
  // With rows, row y of x, xn, xq and stats (an offset added only then: the single row's kernel
  // stays as it was).
  std::optional<Expr<u32>> row;
  if (rows) row = let("row", k.workgroup_id().y());
  // The final norm exactly as rms_norm computes it: lm_head_candidates reads this xn.
  const RmsNormSlice s = emit_rms_norm_slice(k, target, x, weight, in_row(row, constant<u32>(0u), dim), eps, dim);
  std::optional<Expr<f32>> amax;
  for (size_t u = 0; u < s.at.size(); ++u) {
    auto v = let("xn_value", s.normalized(u));
    auto store = [&] { xn[in_row(row, s.at[u], dim)] = v; };
    if (s.in[u])
      if_(*s.in[u], store);
    else
      store();
    auto a = s.in[u] ? select(*s.in[u], abs(v), constant<f32>(0.0f)) : abs(v);
    amax = amax ? max(*amax, a) : a;
  }
  auto top = workgroup_max<f32>(k, k.shared<f32>("amax_parts", wg), *amax, "amax");
  auto sx = let("sx", max(top, 1e-30f) / 127.0f);
  auto inv_sx = let("inv_sx", 1.0f / sx);
  // Words of four consecutive elements, each normalized again with the same expression (the
  // same bits), quantized and packed; the sums of x^2 and (x - x~)^2 for the norms.
  std::optional<Expr<f32>> sq, res;
  auto lid = k.local_index();
  const uint32_t words = dim / 4;
  for (uint32_t j = 0; j * wg < words; ++j) {
    auto w = let("word", lid + j * wg);
    const bool may_pass = (j + 1) * wg > words;
    auto readable = may_pass ? min(w, constant<u32>(words - 1)) : w;
    std::vector<Expr<f32>> e;
    for (uint32_t c = 0; c < 4; ++c)
      e.push_back(let("e", (Expr<f32>(x[in_row(row, readable * 4u + c, dim)]) * s.inv) * Expr<f32>(weight[readable * 4u + c])));
    auto v = make_vec<f32>(e[0], e[1], e[2], e[3]);
    auto r = let("xr", clamp(round(v * inv_sx), make_vec<f32>(-127.0f, -127.0f, -127.0f, -127.0f),
                             make_vec<f32>(127.0f, 127.0f, 127.0f, 127.0f)));
    auto d = v - r * sx;
    Expr<f32> dv = dot(v, v), dd = dot(d, d);
    if (may_pass) {
      dv = select(w < words, dv, constant<f32>(0.0f));
      dd = select(w < words, dd, constant<f32>(0.0f));
      if_(w < words, [&] { xq[in_row(row, w, words)] = pack_i8x4(cast<ivec4>(r)); });
    } else {
      xq[in_row(row, w, words)] = pack_i8x4(cast<ivec4>(r));
    }
    sq = sq ? *sq + dv : dv;
    res = res ? *res + dd : dd;
  }
  // Both sums in one round.
  auto sums = workgroup_add<vec2>(k, k.shared<vec2>("sum_parts", wg), make_vec<f32>(*sq, *res), "sums");
  if_(lid == 0u, [&] {
    stats[in_row(row, constant<u32>(0u), 4)] = sx;
    stats[in_row(row, constant<u32>(1u), 4)] = sqrt(sums.x()) * 1.001f;
    stats[in_row(row, constant<u32>(2u), 4)] = sqrt(sums.y()) * 1.001f + 1e-30f;
    stats[in_row(row, constant<u32>(3u), 4)] = constant<f32>(0.0f);
  });
  return k.build();
}

Kernel lm_head_bounds(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, bool batch) {
  check(vocab, dim);
  const LmHeadSplit split = lm_head_split(target, vocab, dim, rows_per_part);
  const uint32_t wg = lm_head_workgroup(target);
  const uint32_t sg = std::max(1u, target.subgroup_size);
  const uint32_t rows_per_wg = rows_per_workgroup(target, wg) * kRowsPerSubgroup;
  const bool packed = target.int_dot_product;
  KernelBuilder k("lm_head_bounds_" + std::to_string(vocab) + "x" + std::to_string(dim) + "_parts" + std::to_string(split.parts) +
                      (packed ? "_sdot" : "") + (batch ? "_rows" : ""),
                  {wg, 1, 1});
  auto x_q = k.buffer<uvec4>("xq", Access::Read);
  auto x_stats = k.buffer<f32>("stats", Access::Read);
  std::vector<Buffer<uvec4>> table;
  for (uint32_t p = 0; p < split.parts; ++p) table.push_back(k.buffer<uvec4>("table" + std::to_string(p), Access::Read));
  auto scale = k.buffer<f32>("scale", Access::Read);
  auto bound = k.buffer<vec2>("bound", Access::Read);
  auto upper = k.buffer<f32>("upper", Access::Write);
  auto lower = k.buffer<f32>("lower", Access::Write);
  // With rows, x row y (its xq and stats) against every table row: upper at y * stride, lower at
  // y * the workgroups (the offsets are added only then).
  std::optional<Expr<u32>> x_row, upper_at;
  if (batch) {
    x_row = let("x_row", k.workgroup_id().y());
    upper_at = let("upper_at", *x_row * k.push<u32>("stride"));
  }

  // Each lane takes the same 16-element quads of every row (lane, lane + sg, ...): its part of x~
  // (lm_head_input's int8 words, zero past the row) is loaded once and kept in registers, so a
  // row costs only its int8 dot products. sx, ||x||_2 and ||x - x~||_2 enter the bound.
  const uint32_t quads = dim / 16;
  const uint32_t per_lane = (quads + sg - 1) / sg;
  auto lane = k.subgroup_invocation();
  std::vector<Expr<u32>> quad;
  std::vector<std::optional<Expr<boolean>>> valid;
  for (uint32_t j = 0; j < per_lane; ++j) {
    quad.push_back(let("quad", lane + j * sg));
    valid.push_back((j + 1) * sg > quads ? std::optional(let("in_row", quad.back() < quads)) : std::nullopt);
  }
  auto readable = [&](uint32_t j) { return valid[j] ? min(quad[j], constant<u32>(quads - 1)) : quad[j]; };
  std::vector<Expr<u32>> xq;
  for (uint32_t j = 0; j < per_lane; ++j) {
    auto w = let("xq4", Expr<uvec4>(x_q[in_row(x_row, readable(j), dim / 16)]));
    for (uint32_t c = 0; c < 4; ++c) {
      Expr<u32> word = w.lane(c);
      xq.push_back(let("xq", valid[j] ? select(*valid[j], word, constant<u32>(0u)) : word));
    }
  }
  auto sx = let("sx", Expr<f32>(x_stats[in_row(x_row, constant<u32>(0u), 4)]));
  auto norm = let("x_norm", Expr<f32>(x_stats[in_row(x_row, constant<u32>(1u), 4)]));
  auto res_norm = let("residual_norm", Expr<f32>(x_stats[in_row(x_row, constant<u32>(2u), 4)]));

  auto first = let("first_row", k.workgroup_id().x() * rows_per_wg);
  auto end = let("end_row", min(first + rows_per_wg, vocab));
  auto best_lower = k.var<f32>("best_lower", -INFINITY);
  // A row's bound from its shadow dot product (the lanes' partial sums, reduced here).
  auto finish_row = [&](Expr<u32> row, Expr<i32> partial, std::optional<Expr<boolean>> row_valid) {
    auto dot_q = subgroup_add(partial);
    const auto [approx, margin] = lm_head_row_bound(dot_q, Expr<f32>(scale[row]), let("bound", Expr<vec2>(bound[row])), sx, norm, res_norm);
    if_(row_valid ? lane == 0u && *row_valid : lane == 0u, [&] { upper[upper_at ? *upper_at + row : row] = approx + margin; });
    auto low = approx - margin;
    best_lower = max(Expr<f32>(best_lower), row_valid ? select(*row_valid, low, constant<f32>(-INFINITY)) : low);
  };
  // The lanes' partial dot product of `row`'s quads (in part p at `local`) with x~.
  auto partial_dot = [&](uint32_t p, Expr<u32> local, const std::vector<Expr<uvec4>>* loaded) {
    auto base = let("row_base", local * quads);
    std::optional<Expr<i32>> acc;
    for (uint32_t j = 0; j < per_lane; ++j) {
      auto wv = loaded ? (*loaded)[j] : let("w", Expr<uvec4>(table[p][base + (valid[j] ? min(quad[j], constant<u32>(quads - 1)) : quad[j])]));
      auto t = (byte_dot(wv.x(), xq[4 * j], packed) + byte_dot(wv.y(), xq[4 * j + 1], packed)) +
               (byte_dot(wv.z(), xq[4 * j + 2], packed) + byte_dot(wv.w(), xq[4 * j + 3], packed));
      auto term = valid[j] ? select(*valid[j], t, constant<i32>(0)) : t;
      acc = acc ? *acc + term : term;
    }
    return *acc;
  };
  const uint32_t at_once = split.parts == 1 ? kRowsAtOnce : 1u;
  if (at_once <= 1) {
    for_range(first + k.subgroup_id(), end, k.num_subgroups(), [&](Expr<u32> row) {
      auto dot_q = k.var<i32>("dot_q", 0);
      for_row_part(split, row, [&](uint32_t p, Expr<u32> local) { dot_q = partial_dot(p, local, nullptr); });
      finish_row(row, dot_q, std::nullopt);
    }, "row");
  } else {
    // One part: `at_once` rows' loads issued together before any of their arithmetic.
    auto stride = let("row_stride", k.num_subgroups() * at_once);
    for_range(first + k.subgroup_id(), end, stride, [&](Expr<u32> row0) {
      std::vector<Expr<u32>> rows;
      std::vector<std::optional<Expr<boolean>>> row_valid;
      std::vector<std::vector<Expr<uvec4>>> loaded(at_once);
      for (uint32_t g = 0; g < at_once; ++g) {
        auto r = g == 0 ? row0 : let("row_g", row0 + k.num_subgroups() * g);
        row_valid.push_back(g == 0 ? std::nullopt : std::optional(let("row_valid", r < end)));
        rows.push_back(g == 0 ? r : let("row_read", min(r, end - 1u)));
        auto base = let("row_base", rows.back() * quads);
        for (uint32_t j = 0; j < per_lane; ++j)
          loaded[g].push_back(let("w", Expr<uvec4>(table[0][base + (valid[j] ? min(quad[j], constant<u32>(quads - 1)) : quad[j])])));
      }
      for (uint32_t g = 0; g < at_once; ++g) finish_row(rows[g], partial_dot(0, rows[g], &loaded[g]), row_valid[g]);
    }, "row");
  }
  auto wg_lower = workgroup_max<f32>(k, k.shared<f32>("lower_parts", wg), Expr<f32>(best_lower), "wg_lower");
  if_(k.local_index() == 0u, [&] { lower[in_row(x_row, k.workgroup_id().x(), lm_head_bounds_workgroups(target, vocab))] = wg_lower; });
  return k.build();
}

namespace {
// The `count` lowest ids among the subgroup's pending candidates, the same in every lane
// (kArgmaxNone past the last one): id = lane * batches + j stands for that lane's row of batch j.
std::vector<Expr<u32>> lowest_pending_ids(Expr<u32> lane, const std::vector<Var<boolean>>& pending, uint32_t count) {
  const auto batches = static_cast<uint32_t>(pending.size());
  std::vector<Expr<u32>> ids;
  Expr<u32> above = constant<u32>(0u);  // the next id is at least this
  for (uint32_t g = 0; g < count; ++g) {
    Expr<u32> mine = constant<u32>(kArgmaxNone);  // this lane's lowest pending id >= above
    for (uint32_t j = batches; j-- > 0;) {
      auto id = lane * batches + j;
      mine = select(Expr<boolean>(pending[j]) && id >= above, id, mine);
    }
    ids.push_back(let("candidate_id", subgroup_min(mine)));
    above = select(ids.back() == kArgmaxNone, constant<u32>(kArgmaxNone), ids.back() + 1u);
  }
  return ids;
}

// Candidate rows a subgroup computes together (bench/RESULTS.md run 9).
constexpr uint32_t kCandidatesAtOnce = 4;
// Rows per invocation of lm_head_candidate_list's workgroups: on the H100 (2B head, ~3,500 rows
// computed) 1 took 33 us against 42 for the argmax plan's 2 (bench/RESULTS.md run 16).
constexpr uint32_t kListRowsPerInvocation = 1;

// Rows per workgroup of lm_head_candidate_list: fewer than the argmax plan's, so that rows that
// cluster (near tokens' rows alike) spread over more workgroups.
uint32_t candidate_list_chunk(const OpTarget& target) { return lm_head_workgroup(target) * kListRowsPerInvocation; }

}  // namespace

// lm_head_candidates, or with list_k lm_head_candidate_list.
static Kernel candidates_kernel(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part,
                                std::optional<uint32_t> final_advance, std::optional<EmbeddingShape> embed_next,
                                std::optional<uint32_t> list_k, std::optional<uint32_t> rows_lower_count = std::nullopt,
                                bool final_pick = false) {
  // rows_lower_count: lm_head_candidate_rows (with list_k lm_head_candidate_list_rows), x row y
  // against lower bounds in rows of that many; final_pick: with it, each row's last workgroup
  // picks that row's token.
  if (embed_next && !final_advance) throw std::invalid_argument("lm_head_candidates: embed_next needs the final pass");
  if (list_k && final_advance) throw std::invalid_argument("lm_head_candidate_list: a list has no final pass");
  if (list_k && (*list_k == 0 || *list_k > kMaxTopK))
    throw std::invalid_argument("lm_head_candidate_list: k " + std::to_string(*list_k) + " must be in 1.." +
                                std::to_string(kMaxTopK));
  check(vocab, dim);
  const LmHeadSplit split = lm_head_split(target, vocab, dim, rows_per_part);
  const ArgmaxPlan plan = argmax_plan(target, vocab);
  const uint32_t wg = lm_head_workgroup(target);
  const bool batched = rows_lower_count.has_value();
  if (batched && final_advance) throw std::logic_error("lm_head_candidate_rows: no final pass with its advance");
  if (final_pick && list_k) throw std::logic_error("lm_head_candidate_list_rows: a list has no final pass");
  if (final_pick && !batched) throw std::logic_error("lm_head_candidates: final_pick is the rows' final pass");
  const uint32_t bound_groups = batched ? *rows_lower_count : lm_head_bounds_workgroups(target, vocab);
  if (bound_groups == 0) throw std::invalid_argument("lm_head_candidate_rows: no lower bounds");
  KernelBuilder k((list_k ? "lm_head_candidate_list_" : batched ? "lm_head_candidate_rows_" : "lm_head_candidates_") +
                      std::to_string(vocab) + "x" + std::to_string(dim) + "_parts" + std::to_string(split.parts) +
                      (list_k ? "_k" + std::to_string(*list_k) : "") +
                      (final_advance ? (*final_advance ? "_final_advance" : "_final") : "") + (embed_next ? "_embed" : "") +
                      (batched ? "_lower" + std::to_string(bound_groups) : "") + (final_pick ? "_final" : "") +
                      (batched && list_k ? "_rows" : "") + (final_advance || final_pick ? handoff_suffix(target) : ""),
                  {wg, 1, 1});
  auto [x1, x4, t1, t4] = lm_head_bindings(k, dim, split.parts);
  LmHeadRows rows{split, dim, x1, x4, t1, t4};
  auto upper = k.buffer<f32>("upper", Access::Read);
  auto lower = k.buffer<f32>("lower", Access::Read);
  // Batched: x row y (rows.x_base), its upper bounds at y * stride, lower at y * bound_groups and
  // its argmax partials at y * groups (argmax_final with rows reads them there), or its list at
  // y * stride, its count at y and its settings at y * kSampleParamsWords.
  std::optional<Expr<u32>> x_row, upper_at;
  if (batched) {
    x_row = let("x_row", k.workgroup_id().y());
    upper_at = let("upper_at", *x_row * k.push<u32>("stride"));
    rows.x_base = let("x_base", *x_row * (x4 ? dim / 4 : dim));
  }
  std::optional<Buffer<f32>> part_values, list_values;
  std::optional<Buffer<u32>> part_indices, params, list_indices, list_count;
  if (list_k) {
    params = k.buffer<u32>("params", Access::Read);
    list_values = k.buffer<f32>("list_values", Access::Write);
    list_indices = k.buffer<u32>("list_indices", Access::Write);
    list_count = k.buffer<u32>("list_count", Access::ReadWrite);
  } else {
    // With the final pass here, the last workgroup reads every workgroup's partial: coherent (or
    // handed off, ops/common/handoff.h).
    part_values = final_advance || final_pick ? partials_buffer<f32>(k, target, "part_values", Access::ReadWrite)
                                              : k.buffer<f32>("part_values", Access::Write);
    part_indices = final_advance || final_pick ? partials_buffer<u32>(k, target, "part_indices", Access::ReadWrite)
                                               : k.buffer<u32>("part_indices", Access::Write);
  }
  std::optional<Buffer<u32>> counter;
  std::optional<ArgmaxFinalBindings> final_bindings;
  if (final_advance || final_pick) {
    counter = k.buffer<u32>("counter", Access::ReadWrite);
    final_bindings = declare_argmax_final(k, final_advance ? *final_advance : 0u);
  }
  std::optional<NextEmbedding> next_embedding;
  if (embed_next) next_embedding = declare_next_embedding(k, *embed_next);

  const Expr<u32> list_row = x_row ? *x_row : constant<u32>(0u);
  const Expr<u32> list_first = upper_at ? *upper_at : constant<u32>(0u);
  // L: the largest lower bound of all rows. Loads written out, all in flight at once (a loop
  // would wait for each in turn).
  std::optional<Expr<f32>> local_lower;
  for (uint32_t j = 0; j * wg < bound_groups; ++j) {
    auto i = k.local_index() + j * wg;
    Expr<f32> v = lower[in_row(x_row, min(i, constant<u32>(bound_groups - 1)), bound_groups)];
    if ((j + 1) * wg > bound_groups) v = select(i < bound_groups, v, constant<f32>(-INFINITY));
    local_lower = local_lower ? max(*local_lower, v) : v;
  }
  // Argmax: L = the largest lower bound. List: L = the k-th largest of the invocations' maxima
  // (each over its own workgroups of lm_head_bounds, so k distinct rows have lower_r >= L: a row
  // with upper_r < L is below k rows' logits), k from the params (1 when greedy, top_k or list_k
  // otherwise); -inf when fewer than k invocations have a row.
  Expr<f32> floor_l = list_k ? select_kth_largest(k, wg, wg, let("local_lower", *local_lower), sample_rows_needed(*params, *list_k, x_row))
                             : workgroup_max<f32>(k, k.shared<f32>("lower_parts", wg), let("local_lower", *local_lower), "floor");

  // This workgroup's rows, in subgroup-wide batches: the rows that may win, each computed by the
  // whole subgroup as lm_head does (several at once where the table allows, one by one otherwise).
  // Every batch's upper bounds load at once.
  auto lane = k.subgroup_invocation();
  const uint32_t chunk = list_k ? candidate_list_chunk(target) : plan.chunk;
  auto first = let("first_row", k.workgroup_id().x() * chunk);
  auto end = let("end_row", min(first + chunk, vocab));
  auto best_v = k.var<f32>("best_value", -INFINITY);
  auto best_i = k.var<u32>("best_index", kArgmaxNone);
  const uint32_t batches = ceil_div(chunk, wg);
  auto sg_first = let("sg_first", first + k.subgroup_id() * k.subgroup_size());
  auto batch = k.subgroup_size() * k.num_subgroups();
  std::vector<Expr<u32>> bases;
  std::vector<Expr<boolean>> may_win;
  for (uint32_t j = 0; j < batches; ++j) {
    bases.push_back(let("base", sg_first + batch * j));
    auto row = bases.back() + lane;
    auto at = min(row, constant<u32>(vocab - 1));
    may_win.push_back(let("may_win", row < end && Expr<f32>(upper[upper_at ? *upper_at + at : at]) >= floor_l));
  }
  auto take = [&](Expr<f32> v, Expr<u32> candidate) {
    if_(argmax_beats(v, candidate, best_v, best_i), [&] {
      best_v = v;
      best_i = candidate;
    });
  };
  // List: the subgroup's computed rows (uniform; the first `computed` are real) appended by one
  // lane, those whose logit reaches L: below it, k' rows (those with lower_r >= L) are above.
  auto append = [&](const std::vector<Expr<f32>>& v, const std::vector<Expr<u32>>& ids, Expr<u32> computed) {
    if_(lane == 0u, [&] {
      std::vector<Expr<boolean>> keep;
      Expr<u32> kept = constant<u32>(0u);
      for (size_t g = 0; g < v.size(); ++g) {
        keep.push_back(let("keep", computed > uint32_t(g) && v[g] >= floor_l));
        kept = kept + select(keep.back(), constant<u32>(1u), constant<u32>(0u));
      }
      auto n = let("kept_rows", kept);
      if_(n > 0u, [&] {
        auto at = k.var<u32>("list_at", list_first + atomic_add((*list_count)[list_row], n));
        for (size_t g = 0; g < v.size(); ++g)
          if_(keep[g], [&] {
            (*list_values)[Expr<u32>(at)] = v[g];
            (*list_indices)[Expr<u32>(at)] = ids[g];
            at = Expr<u32>(at) + 1u;
          });
      });
    });
  };
  if (rows.several_at_once()) {
    // The subgroup's candidates of every batch, `at_once` together: their rows' loads share one
    // memory latency (one at a time, a subgroup with a few candidates waited for each in turn).
    // Candidate id = lane * batches + j for row bases[j] + lane; ids are taken lowest first (the
    // argmax does not depend on the order).
    const uint32_t at_once = kCandidatesAtOnce;
    std::vector<Var<boolean>> pending;
    for (uint32_t j = 0; j < batches; ++j) pending.push_back(k.var<boolean>("pending", may_win[j]));
    loop([&] {
      const std::vector<Expr<u32>> ids = lowest_pending_ids(lane, pending, at_once);
      if_(ids[0] == kArgmaxNone, [&] { break_(); });
      std::vector<Expr<u32>> candidates, read;  // an absent candidate reads the first's row
      for (uint32_t g = 0; g < at_once; ++g) {
        auto row = sg_first + batch * (ids[g] % batches) + ids[g] / batches;
        candidates.push_back(let("candidate", g == 0 ? row : select(ids[g] == kArgmaxNone, constant<u32>(kArgmaxNone), row)));
        read.push_back(g == 0 ? candidates[0] : select(ids[g] == kArgmaxNone, candidates[0], candidates[g]));
      }
      const auto v = rows.logits(k, read);
      if (list_k) {
        Expr<u32> valid = constant<u32>(1u);  // ids are taken lowest first: the valid ones lead
        for (uint32_t g = 1; g < at_once; ++g) valid = valid + select(ids[g] == kArgmaxNone, constant<u32>(0u), constant<u32>(1u));
        append(v, candidates, let("valid", valid));
      } else {
        for (uint32_t g = 0; g < at_once; ++g) take(v[g], candidates[g]);  // kArgmaxNone never wins
      }
      for (uint32_t j = 0; j < batches; ++j) {
        Expr<boolean> still = pending[j];
        for (const Expr<u32>& id : ids) still = still && lane * batches + j != id;
        pending[j] = still;
      }
    });
  } else {
    for (uint32_t j = 0; j < batches; ++j) {
      auto base = bases[j];
      auto pending = k.var<boolean>("pending", may_win[j]);
      loop([&] {
        auto next = let("next_lane", subgroup_min(select(Expr<boolean>(pending), lane, constant<u32>(kArgmaxNone))));
        if_(next == kArgmaxNone, [&] { break_(); });
        auto candidate = let("candidate", base + next);
        rows.logit(k, candidate, [&](Expr<f32> v) {
          if (list_k)
            append({v}, {candidate}, constant<u32>(1u));
          else
            take(v, candidate);
        });
        if_(lane == next, [&] { pending = constant<boolean>(false); });
      });
    }
  }
  if (list_k) return k.build();
  // The workgroup's best over its subgroups (each subgroup's is uniform), ties to the lower index.
  auto [wv, wi] = workgroup_argmax_combine(k, wg, Expr<f32>(best_v), Expr<u32>(best_i));
  if_(k.local_index() == 0u, [&] {
    (*part_values)[in_row(x_row, k.workgroup_id().x(), plan.groups)] = wv;
    (*part_indices)[in_row(x_row, k.workgroup_id().x(), plan.groups)] = wi;
  });
  if (final_advance || final_pick) {
    // The last workgroup to finish (of the row) runs argmax_final over every partial: one
    // barrier-separated step less than a dispatch of its own.
    auto is_last = k.shared<u32>("is_last", 1);
    const Expr<u32> counter_at = x_row ? *x_row : constant<u32>(0u);
    count_arrival(k, target, (*counter)[counter_at], constant<u32>(plan.groups), is_last);
    // One subgroup of the last workgroup (a shared flag is not a condition a barrier may sit under).
    auto next_token = k.shared<u32>("next_token", 1);
    if_(Expr<u32>(is_last[0u]) == 1u && k.subgroup_id() == 0u, [&] {
      auto token = emit_argmax_final_in_subgroup(k, plan.groups, *part_values, *part_indices, *final_bindings, x_row);
      if_(k.subgroup_invocation() == 0u, [&] {
        atomic_exchange((*counter)[counter_at], 0u);  // zero for the next replay
        if (embed_next) next_token[0u] = token;
      });
    });
    if (embed_next) {
      // The next token's embedding row, widened to f32 as embedding_lookup does, by the whole last
      // workgroup: the next replay starts with its first layer.
      barrier();  // outside the branch: every workgroup reaches it
      if_(Expr<u32>(is_last[0u]) == 1u, [&] {
        emit_embedding_row(k, wg, *embed_next, next_embedding->table, let("token", Expr<u32>(next_token[0u])),
                           next_embedding->x_next);
      });
    }
  }
  return k.build();
}

Kernel lm_head_candidates(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part,
                          std::optional<uint32_t> final_advance, std::optional<EmbeddingShape> embed_next) {
  return candidates_kernel(target, vocab, dim, rows_per_part, final_advance, embed_next, std::nullopt);
}

Kernel lm_head_candidate_rows(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t lower_count,
                              bool final_pick) {
  return candidates_kernel(target, vocab, dim, rows_per_part, std::nullopt, std::nullopt, std::nullopt, lower_count, final_pick);
}

uint32_t lm_head_candidate_list_workgroups(const OpTarget& target, uint32_t vocab) {
  return ceil_div(vocab, candidate_list_chunk(target));
}

Kernel lm_head_candidate_list(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t k) {
  return candidates_kernel(target, vocab, dim, rows_per_part, std::nullopt, std::nullopt, k);
}

Kernel lm_head_candidate_list_rows(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t k,
                                   uint32_t lower_count) {
  return candidates_kernel(target, vocab, dim, rows_per_part, std::nullopt, std::nullopt, k, lower_count);
}

Plan plan_lm_head_input(const OpTarget& target, uint32_t dim, bool rows) {
  if (rows) return {lm_head_input(target, dim, true), [](uint32_t count) { return rt::Grid{1, count}; }};
  return {lm_head_input(target, dim), fixed_grid({1})};
}

Plan plan_lm_head_bounds(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, bool rows) {
  const uint32_t groups = lm_head_bounds_workgroups(target, vocab);
  if (rows) return {lm_head_bounds(target, vocab, dim, rows_per_part, true), [groups](uint32_t count) { return rt::Grid{groups, count}; }};
  return {lm_head_bounds(target, vocab, dim, rows_per_part), fixed_grid({groups})};
}

Plan plan_lm_head_candidate_rows(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t lower_count,
                                 bool final_pick) {
  const uint32_t groups = argmax_plan(target, vocab).groups;
  return {lm_head_candidate_rows(target, vocab, dim, rows_per_part, lower_count, final_pick),
          [groups](uint32_t count) { return rt::Grid{groups, count}; }};
}

Plan plan_lm_head_candidates(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part,
                             std::optional<uint32_t> final_advance, std::optional<EmbeddingShape> embed_next) {
  return {lm_head_candidates(target, vocab, dim, rows_per_part, final_advance, embed_next),
          fixed_grid({argmax_plan(target, vocab).groups})};
}

Plan plan_lm_head_candidate_list(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t k) {
  return {lm_head_candidate_list(target, vocab, dim, rows_per_part, k), fixed_grid({lm_head_candidate_list_workgroups(target, vocab)})};
}

Plan plan_lm_head_candidate_list_rows(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part, uint32_t k,
                                      uint32_t lower_count) {
  const uint32_t groups = lm_head_candidate_list_workgroups(target, vocab);
  return {lm_head_candidate_list_rows(target, vocab, dim, rows_per_part, k, lower_count),
          [groups](uint32_t count) { return rt::Grid{groups, count}; }};
}

}  // namespace bdsl::ops
