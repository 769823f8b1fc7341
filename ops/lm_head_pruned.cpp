#include "ops/lm_head_pruned.h"

#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/argmax.h"
#include "ops/lm_head.h"
#include "ops/matrix_support.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {
constexpr uint32_t kRowsPerSubgroup = 2;  // per workgroup of lm_head_bounds
constexpr uint32_t kNone = 0xffffffffu;

uint32_t workgroup_of(const OpTarget& t) { return subgroup_multiple_workgroup(t, 256); }

void check(uint32_t vocab, uint32_t dim) {
  if (vocab == 0) throw std::invalid_argument("lm_head_pruned: empty vocabulary");
  if (!lm_head_pruned_supported(dim))
    throw std::invalid_argument("lm_head_pruned: dim " + std::to_string(dim) + " is not a multiple of 16");
}
}  // namespace

bool lm_head_pruned_supported(uint32_t dim) { return dim > 0 && dim % 16 == 0; }

uint32_t lm_head_bounds_workgroups(const OpTarget& target, uint32_t vocab) {
  return ceil_div(vocab, rows_per_workgroup(target, workgroup_of(target)) * kRowsPerSubgroup);
}

Kernel lm_head_bounds(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
  check(vocab, dim);
  const LmHeadSplit split = lm_head_split(target, vocab, dim, rows_per_part);
  const uint32_t wg = workgroup_of(target);
  const uint32_t rows_per_wg = rows_per_workgroup(target, wg) * kRowsPerSubgroup;
  KernelBuilder k("lm_head_bounds_" + std::to_string(vocab) + "x" + std::to_string(dim) + "_parts" + std::to_string(split.parts),
                  {wg, 1, 1});
  auto x = k.buffer<vec4>("x", Access::Read);
  std::vector<Buffer<uvec4>> table;
  for (uint32_t p = 0; p < split.parts; ++p) table.push_back(k.buffer<uvec4>("table" + std::to_string(p), Access::Read));
  auto scale = k.buffer<f32>("scale", Access::Read);
  auto bound = k.buffer<f32>("bound", Access::Read);
  auto upper = k.buffer<f32>("upper", Access::Write);
  auto lower = k.buffer<f32>("lower", Access::Write);

  // ||x||_2, with a margin for its own rounding (a sum of dim squares and a square root).
  auto sq = k.var<f32>("sq", 0.0f);
  for_range(k.local_index(), dim / 4, wg, [&](Expr<u32> i) {
    auto v = let("xv", Expr<vec4>(x[i]));
    sq += dot(v, v);
  }, "i");
  auto norm = let("x_norm", sqrt(workgroup_add<f32>(k, k.shared<f32>("sq_parts", wg), Expr<f32>(sq), "sq_total")) * 1.001f);

  const uint32_t quads = dim / 16;  // uvec4 of 16 int8 per row
  auto first = let("first_row", k.workgroup_id().x() * rows_per_wg);
  auto end = let("end_row", min(first + rows_per_wg, vocab));
  auto best_lower = k.var<f32>("best_lower", -INFINITY);
  for_range(first + k.subgroup_id(), end, k.num_subgroups(), [&](Expr<u32> row) {
    auto row_dot = [&](const Buffer<uvec4>& t, Expr<u32> base) {
      auto acc = k.var<f32>("acc", 0.0f);
      for_range(k.subgroup_invocation(), quads, k.subgroup_size(), [&](Expr<u32> i) {
        auto w = let("w", Expr<uvec4>(t[base + i]));
        auto xi = i * 4u;
        // int8 -> f32 without the quarter-rate conversion: 2^23 + (b + 128) as float bits, minus
        // 2^23 + 128, is b exactly (two full-rate operations).
        auto widen = [](Expr<u32> word) {
          auto biased = let("biased", word ^ 0x80808080u);
          auto byte = [&](uint32_t j) {
            return bitcast<f32>(((biased >> (8u * j)) & 0xffu) | 0x4b000000u) - 8388736.0f;
          };
          return make_vec<f32>(byte(0), byte(1), byte(2), byte(3));
        };
        acc += dot(widen(w.x()), Expr<vec4>(x[xi])) + dot(widen(w.y()), Expr<vec4>(x[xi + 1u])) +
               dot(widen(w.z()), Expr<vec4>(x[xi + 2u])) + dot(widen(w.w()), Expr<vec4>(x[xi + 3u]));
      }, "quad");
      return subgroup_add(Expr<f32>(acc));
    };
    auto dot_q = k.var<f32>("dot_q", 0.0f);
    std::function<void(uint32_t)> part = [&](uint32_t p) {
      auto body = [&] {
        auto local = p == 0 ? row : let("local_row", row - p * split.rows_per_part);
        dot_q = row_dot(table[p], let("row_base", local * quads));
      };
      if (p + 1 == split.parts)
        body();
      else
        if_(row < (p + 1) * split.rows_per_part, body).else_([&] { part(p + 1); });
    };
    part(0);
    auto approx = let("approx", Expr<f32>(dot_q) * Expr<f32>(scale[row]));
    auto margin = let("margin", Expr<f32>(bound[row]) * norm + abs(approx) * 1e-6f);
    if_(k.subgroup_invocation() == 0u, [&] { upper[row] = approx + margin; });
    best_lower = max(Expr<f32>(best_lower), approx - margin);
  }, "row");
  auto wg_lower = workgroup_max<f32>(k, k.shared<f32>("lower_parts", wg), Expr<f32>(best_lower), "wg_lower");
  if_(k.local_index() == 0u, [&] { lower[k.workgroup_id().x()] = wg_lower; });
  return k.build();
}

Kernel lm_head_candidates(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
  check(vocab, dim);
  const LmHeadSplit split = lm_head_split(target, vocab, dim, rows_per_part);
  const ArgmaxPlan plan = argmax_plan(target, vocab);
  const uint32_t wg = workgroup_of(target);
  const uint32_t bound_groups = lm_head_bounds_workgroups(target, vocab);
  KernelBuilder k("lm_head_candidates_" + std::to_string(vocab) + "x" + std::to_string(dim) + "_parts" +
                      std::to_string(split.parts),
                  {wg, 1, 1});
  auto [x1, x4, t1, t4] = lm_head_bindings(k, dim, split.parts);
  const LmHeadRows rows{split, dim, x1, x4, t1, t4};
  auto upper = k.buffer<f32>("upper", Access::Read);
  auto lower = k.buffer<f32>("lower", Access::Read);
  auto part_values = k.buffer<f32>("part_values", Access::Write);
  auto part_indices = k.buffer<u32>("part_indices", Access::Write);

  // L: the largest lower bound of all rows. Loads written out, all in flight at once (a loop
  // would wait for each in turn).
  std::optional<Expr<f32>> local_lower;
  for (uint32_t j = 0; j * wg < bound_groups; ++j) {
    auto i = k.local_index() + j * wg;
    Expr<f32> v = lower[min(i, constant<u32>(bound_groups - 1))];
    if ((j + 1) * wg > bound_groups) v = select(i < bound_groups, v, constant<f32>(-INFINITY));
    local_lower = local_lower ? max(*local_lower, v) : v;
  }
  auto floor_l = workgroup_max<f32>(k, k.shared<f32>("lower_parts", wg), let("local_lower", *local_lower), "floor");

  // This workgroup's rows, a subgroup-wide batch at a time: rows that may win, one by one, each
  // computed by the whole subgroup as lm_head does. Every batch's upper bounds load at once.
  auto lane = k.subgroup_invocation();
  auto first = let("first_row", k.workgroup_id().x() * plan.chunk);
  auto end = let("end_row", min(first + plan.chunk, vocab));
  auto best_v = k.var<f32>("best_value", -INFINITY);
  auto best_i = k.var<u32>("best_index", kNone);
  auto beats = [](Expr<f32> v, Expr<u32> i, Expr<f32> bv, Expr<u32> bi) {
    return i != kNone && (bi == kNone || v > bv || (v == bv && i < bi));
  };
  const uint32_t batches = ceil_div(plan.chunk, wg);
  auto sg_first = let("sg_first", first + k.subgroup_id() * k.subgroup_size());
  auto batch = k.subgroup_size() * k.num_subgroups();
  std::vector<Expr<u32>> bases;
  std::vector<Expr<boolean>> may_win;
  for (uint32_t j = 0; j < batches; ++j) {
    bases.push_back(let("base", sg_first + batch * j));
    auto row = bases.back() + lane;
    may_win.push_back(let("may_win", row < end && Expr<f32>(upper[min(row, constant<u32>(vocab - 1))]) >= floor_l));
  }
  for (uint32_t j = 0; j < batches; ++j) {
    auto base = bases[j];
    auto pending = k.var<boolean>("pending", may_win[j]);
    loop([&] {
      auto next = let("next_lane", subgroup_min(select(Expr<boolean>(pending), lane, constant<u32>(kNone))));
      if_(next == kNone, [&] { break_(); });
      auto candidate = let("candidate", base + next);
      rows.logit(k, candidate, [&](Expr<f32> v) {
        if_(beats(v, candidate, best_v, best_i), [&] {
          best_v = v;
          best_i = candidate;
        });
      });
      if_(lane == next, [&] { pending = constant<boolean>(false); });
    });
  }
  // The workgroup's best over its subgroups (each subgroup's is uniform), ties to the lower index.
  auto sv = k.shared<f32>("sg_values", wg);
  auto si = k.shared<u32>("sg_indices", wg);
  if_(subgroup_elect(), [&] {
    sv[k.subgroup_id()] = best_v;
    si[k.subgroup_id()] = best_i;
  });
  barrier();
  if_(k.local_index() == 0u, [&] {
    auto wv = k.var<f32>("wg_value", -INFINITY);
    auto wi = k.var<u32>("wg_index", kNone);
    for_range(0u, k.num_subgroups(), [&](Expr<u32> s) {
      auto v = let("sv", Expr<f32>(sv[s]));
      auto i = let("si", Expr<u32>(si[s]));
      if_(beats(v, i, wv, wi), [&] {
        wv = v;
        wi = i;
      });
    }, "sg");
    part_values[k.workgroup_id().x()] = wv;
    part_indices[k.workgroup_id().x()] = wi;
  });
  return k.build();
}

}  // namespace bdsl::ops
