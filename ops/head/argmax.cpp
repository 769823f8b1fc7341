#include "ops/head/argmax.h"

#include <cmath>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "ops/common/matrix_support.h"
#include "ops/common/step_state.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

Expr<boolean> argmax_beats(Expr<f32> v, Expr<u32> i, Expr<f32> best_v, Expr<u32> best_i) {
  return i != kArgmaxNone && (best_i == kArgmaxNone || v > best_v || (v == best_v && i < best_i));
}

namespace {

// Each lane's (value, index) -> the subgroup's best, in every lane: the largest value, then the
// lowest index holding it (argmax_beats' order).
std::pair<Expr<f32>, Expr<u32>> subgroup_argmax(Expr<f32> value, Expr<u32> index) {
  auto m = let("sg_max", subgroup_max(value));
  return {m, let("sg_index", subgroup_min(select(value == m, index, constant<u32>(kArgmaxNone))))};
}

// This invocation's best (value, index) over j = start, start + stride, ... < end.
std::pair<Expr<f32>, Expr<u32>> scan_argmax(KernelBuilder& k, Expr<u32> start, Expr<u32> end, Expr<u32> stride,
                                            const std::function<Expr<f32>(Expr<u32>)>& value,
                                            const std::function<Expr<u32>(Expr<u32>)>& index) {
  auto best_v = k.var<f32>("best_value", -INFINITY);
  auto best_i = k.var<u32>("best_index", kArgmaxNone);
  for_range(start, end, stride, [&](Expr<u32> j) {
    auto v = let("v", value(j));
    auto i = let("i", index(j));
    if_(argmax_beats(v, i, best_v, best_i), [&] {
      best_v = v;
      best_i = i;
    });
  }, "j");
  return {Expr<f32>(best_v), Expr<u32>(best_i)};
}

}  // namespace

std::pair<Expr<f32>, Expr<u32>> workgroup_argmax_combine(KernelBuilder& k, uint32_t wg, Expr<f32> value, Expr<u32> index) {
  auto [m, sg_i] = subgroup_argmax(value, index);
  auto sv = k.shared<f32>("sg_values", wg);
  auto si = k.shared<u32>("sg_indices", wg);
  if_(subgroup_elect(), [&] {
    sv[k.subgroup_id()] = m;
    si[k.subgroup_id()] = sg_i;
  });
  barrier();
  auto wv = k.var<f32>("wg_value", -INFINITY);
  auto wi = k.var<u32>("wg_index", kArgmaxNone);
  for_range(0u, k.num_subgroups(), [&](Expr<u32> s) {
    auto v = let("sv", Expr<f32>(sv[s]));
    auto i = let("si", Expr<u32>(si[s]));
    if_(argmax_beats(v, i, wv, wi), [&] {
      wv = v;
      wi = i;
    });
  }, "sg");
  return {Expr<f32>(wv), Expr<u32>(wi)};
}

namespace {

}  // namespace

std::pair<Expr<f32>, Expr<u32>> workgroup_argmax(KernelBuilder& k, uint32_t wg, Expr<u32> begin, Expr<u32> end,
                                                 const std::function<Expr<f32>(Expr<u32>)>& value,
                                                 const std::function<Expr<u32>(Expr<u32>)>& index) {
  auto [v, i] = scan_argmax(k, begin + k.local_index(), end, constant<u32>(wg), value, index);
  return workgroup_argmax_combine(k, wg, v, i);
}

ArgmaxPlan argmax_plan(const OpTarget& target, uint32_t n) {
  if (n == 0) throw std::invalid_argument("argmax: no values");
  ArgmaxPlan p;
  p.workgroup = subgroup_multiple_workgroup(target, 256);
  // 2 values per invocation: ~250 workgroups for a 128K vocabulary, so the greedy head's candidate
  // rows (lm_head_candidates, which uses this plan) spread over the whole GPU (bench/RESULTS.md, "Behind the code").
  p.chunk = p.workgroup * 2;
  p.groups = ceil_div(n, p.chunk);
  return p;
}

Kernel argmax_partial(const OpTarget& target, uint32_t n, bool rows) {
  const ArgmaxPlan p = argmax_plan(target, n);
  KernelBuilder k("argmax_partial_" + std::to_string(n) + (rows ? "_rows" : ""), {p.workgroup, 1, 1});
  auto values = k.buffer<f32>("values", Access::Read);
  auto part_values = k.buffer<f32>("part_values", Access::Write);
  auto part_indices = k.buffer<u32>("part_indices", Access::Write);
  // With rows: row y's values start at y * stride, its partials at y * groups.
  std::optional<Expr<u32>> first;
  if (rows) first = let("row_start", k.workgroup_id().y() * k.push<u32>("stride"));
  auto g = k.workgroup_id().x();
  auto out = rows ? let("part", k.workgroup_id().y() * p.groups + g) : g;
  auto begin = let("begin", g * p.chunk);
  auto end = let("end", min(begin + p.chunk, n));
  auto [v, i] = workgroup_argmax(k, p.workgroup, begin, end,
                                 [&](Expr<u32> j) { return Expr<f32>(values[first ? *first + j : j]); },
                                 [](Expr<u32> j) { return j; });
  if_(k.local_index() == 0u, [&] {
    part_values[out] = v;
    part_indices[out] = i;
  });
  return k.build();
}

ArgmaxFinalBindings declare_argmax_final(KernelBuilder& k, uint32_t advance_context) {
  ArgmaxFinalBindings b{k.buffer<u32>("token", Access::Write), std::nullopt, std::nullopt, advance_context};
  if (advance_context) {
    b.step = k.buffer<u32>("step", Access::ReadWrite);
    b.generated = k.buffer<u32>("generated", Access::Write);
  }
  return b;
}

namespace {

// The argmax `i` written as the token (of `row`), the step state moved on (advance_context).
void store_argmax(const ArgmaxFinalBindings& b, Expr<u32> i, std::optional<Expr<u32>> row = std::nullopt) {
  if (row)
    b.token[*row] = i;
  else
    b.token[0u] = i;
  if (!b.advance_context) return;
  auto pos = let("pos", Expr<u32>((*b.step)[kStepPos]));
  (*b.step)[kStepToken] = i;
  (*b.step)[kStepPos] = pos + 1u;
  (*b.step)[kStepEpoch] = Expr<u32>((*b.step)[kStepEpoch]) + 1u;
  if_(pos < b.advance_context, [&] { (*b.generated)[pos] = i; });
}

}  // namespace

namespace {

// Where partial j of `row` lies: row * groups + j (j for one row).
std::function<Expr<u32>(Expr<u32>)> row_partial(std::optional<Expr<u32>> row, uint32_t groups) {
  if (!row) return [](Expr<u32> j) { return j; };
  auto first = let("first_part", *row * groups);
  return [first](Expr<u32> j) { return first + j; };
}

// row: none for one row (the token at token[0]).
void emit_argmax_final_rows(KernelBuilder& k, uint32_t wg, uint32_t groups, const Buffer<f32>& part_values,
                            const Buffer<u32>& part_indices, const ArgmaxFinalBindings& b, std::optional<Expr<u32>> row) {
  const auto at = row_partial(row, groups);
  auto [v, i] = workgroup_argmax(k, wg, constant<u32>(0u), constant<u32>(groups),
                                 [&](Expr<u32> j) { return Expr<f32>(part_values[at(j)]); },
                                 [&](Expr<u32> j) { return Expr<u32>(part_indices[at(j)]); });
  (void)v;
  if_(k.local_index() == 0u, [&] { store_argmax(b, i, row); });
}

}  // namespace

void emit_argmax_final(KernelBuilder& k, uint32_t wg, uint32_t groups, const Buffer<f32>& part_values,
                       const Buffer<u32>& part_indices, const ArgmaxFinalBindings& b) {
  emit_argmax_final_rows(k, wg, groups, part_values, part_indices, b, std::nullopt);
}

Expr<u32> emit_argmax_final_in_subgroup(KernelBuilder& k, uint32_t groups, const Buffer<f32>& part_values,
                                        const Buffer<u32>& part_indices, const ArgmaxFinalBindings& b,
                                        std::optional<Expr<u32>> row) {
  auto lane = k.subgroup_invocation();
  const auto at = row_partial(row, groups);
  auto [v, i] = scan_argmax(k, lane, constant<u32>(groups), k.subgroup_size(),
                            [&](Expr<u32> j) { return Expr<f32>(part_values[at(j)]); },
                            [&](Expr<u32> j) { return Expr<u32>(part_indices[at(j)]); });
  auto [top, top_index] = subgroup_argmax(v, i);
  (void)top;
  if_(lane == 0u, [&] { store_argmax(b, top_index, row); });
  return top_index;
}

Kernel argmax_final(const OpTarget& target, uint32_t n, uint32_t advance_context, bool rows) {
  if (rows && advance_context) throw std::invalid_argument("argmax_final: rows advance no step state");
  const ArgmaxPlan p = argmax_plan(target, n);
  const std::string suffix = advance_context ? "_advance" : rows ? "_rows" : "";
  KernelBuilder k("argmax_final_" + std::to_string(n) + suffix, {p.workgroup, 1, 1});
  auto part_values = k.buffer<f32>("part_values", Access::Read);
  auto part_indices = k.buffer<u32>("part_indices", Access::Read);
  const ArgmaxFinalBindings b = declare_argmax_final(k, advance_context);
  emit_argmax_final_rows(k, p.workgroup, p.groups, part_values, part_indices, b,
                         rows ? std::optional<Expr<u32>>(k.workgroup_id().y()) : std::nullopt);
  return k.build();
}

Plan plan_argmax_partial(const OpTarget& target, uint32_t n, bool rows) {
  const uint32_t groups = argmax_plan(target, n).groups;
  return {argmax_partial(target, n, rows), [groups](uint32_t count) { return rt::Grid{groups, count}; }};
}

Plan plan_argmax_final(const OpTarget& target, uint32_t n, uint32_t advance_context, bool rows) {
  return {argmax_final(target, n, advance_context, rows), [](uint32_t count) { return rt::Grid{1, count}; }};
}

}  // namespace bdsl::ops
