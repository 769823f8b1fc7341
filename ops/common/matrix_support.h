// Pieces the matrix ops (quantize_activations, ternary_matvec, lm_head, argmax, top_k) share:
// workgroup sizing from the OpTarget and workgroup-wide reductions emitted into a kernel.
// Not an op: nothing here builds a whole kernel.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dsl/dsl.h"
#include "ops/target.h"

namespace bdsl::ops {

// A workgroup of whole subgroups, at most `cap` invocations (and at most the device's limit).
inline uint32_t subgroup_multiple_workgroup(const OpTarget& t, uint32_t cap = 256) {
  const uint32_t s = std::max(1u, t.subgroup_size);
  const uint32_t limit = std::min(cap, t.max_workgroup_invocations);
  return std::max(s, limit / s * s);
}

// Rows a row-per-subgroup kernel gives one workgroup: its subgroups when the device runs the
// target's subgroup size. The kernels loop over their rows with the subgroup count they really
// get, so a device that picks another subgroup size still covers every row.
inline uint32_t rows_per_workgroup(const OpTarget& t, uint32_t workgroup) {
  return std::max(1u, workgroup / std::max(1u, t.subgroup_size));
}

inline uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// A scratch of `w` elements (one a subgroup at any subgroup size, for a workgroup of w invocations)
// for each of `n` reductions.
template <class T>
std::vector<dsl::Shared<T>> scratch_each(dsl::KernelBuilder& k, size_t n, uint32_t w, const std::string& name) {
  std::vector<dsl::Shared<T>> scratch;
  for (size_t t = 0; t < n; ++t) scratch.push_back(k.template shared<T>(name, w));
  return scratch;
}

// Combines values across the workgroup; every invocation gets the results. Each value needs its
// own `scratch` of one element per subgroup (size it by the workgroup: any subgroup size fits).
// One barrier for all of them. Subgroup partials are combined in subgroup order, so each result is
// the same on every run, and the same as reduced alone.
template <class T>
std::vector<dsl::Expr<T>> workgroup_reduce_each(dsl::KernelBuilder& k, const std::vector<dsl::Shared<T>>& scratch,
                                                const std::vector<dsl::Expr<T>>& values,
                                                dsl::Expr<T> (*subgroup_op)(const dsl::Expr<T>&),
                                                const std::function<dsl::Expr<T>(dsl::Expr<T>, dsl::Expr<T>)>& combine,
                                                const std::string& name) {
  using namespace dsl;
  for (size_t t = 0; t < values.size(); ++t) {
    auto part = subgroup_op(values[t]);
    if_(subgroup_elect(), [&] { scratch[t][k.subgroup_id()] = part; });
  }
  barrier();
  std::vector<Expr<T>> totals;
  for (size_t t = 0; t < values.size(); ++t) {
    auto total = k.var<T>(name, scratch[t][0u]);
    for_range(1u, k.num_subgroups(), [&](Expr<u32> i) { total = combine(total, scratch[t][i]); }, "sg");
    totals.push_back(Expr<T>(total));
  }
  return totals;
}

template <class T>
dsl::Expr<T> workgroup_reduce(dsl::KernelBuilder& k, const dsl::Shared<T>& scratch, const dsl::Expr<T>& v,
                              dsl::Expr<T> (*subgroup_op)(const dsl::Expr<T>&),
                              const std::function<dsl::Expr<T>(dsl::Expr<T>, dsl::Expr<T>)>& combine,
                              const std::string& name) {
  return workgroup_reduce_each<T>(k, {scratch}, {v}, subgroup_op, combine, name)[0];
}

template <class T>
std::vector<dsl::Expr<T>> workgroup_add_each(dsl::KernelBuilder& k, const std::vector<dsl::Shared<T>>& scratch,
                                             const std::vector<dsl::Expr<T>>& values, const std::string& name) {
  return workgroup_reduce_each<T>(
      k, scratch, values, [](const dsl::Expr<T>& x) { return dsl::subgroup_add(x); },
      [](dsl::Expr<T> a, dsl::Expr<T> b) { return a + b; }, name);
}

template <class T>
std::vector<dsl::Expr<T>> workgroup_max_each(dsl::KernelBuilder& k, const std::vector<dsl::Shared<T>>& scratch,
                                             const std::vector<dsl::Expr<T>>& values, const std::string& name) {
  return workgroup_reduce_each<T>(
      k, scratch, values, [](const dsl::Expr<T>& x) { return dsl::subgroup_max(x); },
      [](dsl::Expr<T> a, dsl::Expr<T> b) { return dsl::max(a, b); }, name);
}

template <class T>
dsl::Expr<T> workgroup_add(dsl::KernelBuilder& k, const dsl::Shared<T>& scratch, const dsl::Expr<T>& v,
                           const std::string& name) {
  return workgroup_add_each<T>(k, {scratch}, {v}, name)[0];
}

template <class T>
dsl::Expr<T> workgroup_max(dsl::KernelBuilder& k, const dsl::Shared<T>& scratch, const dsl::Expr<T>& v,
                           const std::string& name) {
  return workgroup_max_each<T>(k, {scratch}, {v}, name)[0];
}

// Runs item(i, u) for this invocation's items i = local + u * invocations of `count` (a
// workgroup of `invocations` spreading `count` loads or stores over its invocations).
inline void for_invocation_items(dsl::KernelBuilder& k, uint32_t count, uint32_t invocations,
                                 const std::function<void(dsl::Expr<dsl::u32>, uint32_t)>& item) {
  using namespace dsl;
  for (uint32_t u = 0; u * invocations < count; ++u) {
    auto i = let("item", k.local_index() + u * invocations);
    if ((u + 1) * invocations <= count)
      item(i, u);
    else
      if_(i < count, [&] { item(i, u); });
  }
}

}  // namespace bdsl::ops
