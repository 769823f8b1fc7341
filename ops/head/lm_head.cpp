#include "ops/head/lm_head.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/matrix_support.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

uint32_t lm_head_workgroup(const OpTarget& t) { return subgroup_multiple_workgroup(t, 256); }

namespace {

// x . row over `words` table elements of `T` (u32: 2 halves, uvec4: 8 halves); every lane gets it.
Expr<f32> row_dot_u32(KernelBuilder& k, const Buffer<u32>& table, const Buffer<f32>& x, Expr<u32> base,
                      uint32_t words, const std::optional<Expr<u32>>& x_base) {
  auto xi = [&](Expr<u32> i) { return x_base ? *x_base + i : i; };
  auto acc = k.var<f32>("acc", 0.0f);
  for_range(k.subgroup_invocation(), words, k.subgroup_size(), [&](Expr<u32> i) {
    auto e = let("e", unpack_half2x16(table[base + i]));
    acc += e.x() * x[xi(i * 2u)] + e.y() * x[xi(i * 2u + 1u)];
  }, "word");
  return subgroup_add(Expr<f32>(acc));
}

// x . row for the rows at `bases` (any number, the same arithmetic for each): every lane sums its
// quads lane, lane + sg, ... in that order, then the subgroup adds the lanes. Each pass loads
// every row's quad first.
std::vector<Expr<f32>> row_dots_uvec4(KernelBuilder& k, const Buffer<uvec4>& table, const Buffer<vec4>& x,
                                      const std::vector<Expr<u32>>& bases, uint32_t quads,
                                      const std::optional<Expr<u32>>& x_base) {
  auto xi = [&](Expr<u32> i) { return x_base ? *x_base + i : i; };
  std::vector<Var<f32>> acc;
  for (size_t r = 0; r < bases.size(); ++r) acc.push_back(k.var<f32>("acc", 0.0f));
  for_range(k.subgroup_invocation(), quads, k.subgroup_size(), [&](Expr<u32> i) {
    std::vector<Expr<uvec4>> t;
    for (const Expr<u32>& base : bases) t.push_back(let("t", Expr<uvec4>(table[base + i])));
    for (size_t r = 0; r < bases.size(); ++r) {
      auto a = let("h01", unpack_half2x16(t[r].x())), b = let("h23", unpack_half2x16(t[r].y()));
      auto c = let("h45", unpack_half2x16(t[r].z())), d = let("h67", unpack_half2x16(t[r].w()));
      acc[r] += dot(make_vec<f32>(a.x(), a.y(), b.x(), b.y()), Expr<vec4>(x[xi(i * 2u)])) +
                dot(make_vec<f32>(c.x(), c.y(), d.x(), d.y()), Expr<vec4>(x[xi(i * 2u + 1u)]));
    }
  }, "quad");
  std::vector<Expr<f32>> dots;
  for (const auto& a : acc) dots.push_back(subgroup_add(Expr<f32>(a)));
  return dots;
}

Expr<f32> row_dot_uvec4(KernelBuilder& k, const Buffer<uvec4>& table, const Buffer<vec4>& x, Expr<u32> base,
                        uint32_t quads, const std::optional<Expr<u32>>& x_base) {
  return row_dots_uvec4(k, table, x, {base}, quads, x_base)[0];
}
}  // namespace

void for_row_part(const LmHeadSplit& split, Expr<u32> row, const std::function<void(uint32_t, Expr<u32>)>& body) {
  std::function<void(uint32_t)> part = [&](uint32_t p) {
    auto run = [&] { body(p, p == 0 ? row : let("local_row", row - p * split.rows_per_part)); };
    if (p + 1 == split.parts)
      run();
    else
      if_(row < (p + 1) * split.rows_per_part, run).else_([&] { part(p + 1); });
  };
  part(0);
}

void LmHeadRows::logit(KernelBuilder& k, Expr<u32> row, const std::function<void(Expr<f32>)>& use) const {
  const bool wide = !t4.empty();
  const uint32_t row_elems = wide ? dim / 8 : dim / 2;
  for_row_part(split, row, [&](uint32_t p, Expr<u32> local) {
    auto base = let("row_base", local * row_elems);
    use(wide ? row_dot_uvec4(k, t4[p], *x4, base, row_elems, x_base) : row_dot_u32(k, t1[p], *x1, base, row_elems, x_base));
  });
}

uint32_t LmHeadSplit::rows_in_part(uint32_t p, uint32_t vocab) const {
  return std::min<uint64_t>(rows_per_part, vocab - uint64_t(p) * rows_per_part);
}

std::vector<Expr<f32>> LmHeadRows::logits(KernelBuilder& k, const std::vector<Expr<u32>>& rows) const {
  if (!several_at_once()) throw std::logic_error("LmHeadRows::logits: a table of several parts or of u32 words");
  const uint32_t quads = dim / 8;
  std::vector<Expr<u32>> bases;
  for (const Expr<u32>& row : rows) bases.push_back(let("row_base", row * quads));
  return row_dots_uvec4(k, t4[0], *x4, bases, quads, x_base);
}

LmHeadSplit lm_head_split(const OpTarget& target, uint32_t vocab, uint32_t dim) {
  if (dim == 0 || dim % 2 != 0) throw std::invalid_argument("lm_head: dim " + std::to_string(dim) + " is not even");
  if (vocab == 0) throw std::invalid_argument("lm_head: empty vocabulary");
  const uint64_t row_bytes = uint64_t(dim) * 2;
  // Rows per part: as many as fit, a multiple of `step` so each part is a multiple of 256 bytes.
  const uint64_t step = 256 / std::gcd<uint64_t>(256, row_bytes);
  uint64_t rows = std::min<uint64_t>(target.max_storage_buffer_range / row_bytes, vocab);
  if (rows < vocab) rows = rows / step * step;
  if (rows == 0)
    throw std::invalid_argument("lm_head: a part of " + std::to_string(step) + " rows of " + std::to_string(row_bytes) +
                                " bytes exceeds maxStorageBufferRange " + std::to_string(target.max_storage_buffer_range));
  LmHeadSplit s;
  s.rows_per_part = static_cast<uint32_t>(rows);
  s.parts = ceil_div(vocab, rows);
  s.part_bytes = rows * row_bytes;
  return s;
}

LmHeadRows::Bindings lm_head_bindings(KernelBuilder& k, uint32_t dim, uint32_t parts) {
  LmHeadRows::Bindings b;
  const bool wide = dim % 8 == 0;
  if (wide)
    std::get<1>(b) = k.buffer<vec4>("x", Access::Read);
  else
    std::get<0>(b) = k.buffer<f32>("x", Access::Read);
  for (uint32_t p = 0; p < parts; ++p) {
    const std::string name = "table" + std::to_string(p);
    if (wide)
      std::get<3>(b).push_back(k.buffer<uvec4>(name, Access::Read));
    else
      std::get<2>(b).push_back(k.buffer<u32>(name, Access::Read));
  }
  return b;
}

uint32_t lm_head_workgroups(const OpTarget& target, uint32_t vocab) {
  return ceil_div(vocab, rows_per_workgroup(target, lm_head_workgroup(target)));
}

Kernel lm_head(const OpTarget& target, uint32_t vocab, uint32_t dim) {
  return lm_head(target, vocab, dim, lm_head_split(target, vocab, dim).rows_per_part);
}

LmHeadSplit lm_head_split(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
  LmHeadSplit split = lm_head_split(target, vocab, dim);  // checks the shape
  if (rows_per_part == 0 || uint64_t(rows_per_part) * dim * 2 > target.max_storage_buffer_range)
    throw std::invalid_argument("lm_head: parts of " + std::to_string(rows_per_part) + " rows of " + std::to_string(dim) +
                                " halves do not fit maxStorageBufferRange");
  split.rows_per_part = std::min(rows_per_part, vocab);
  split.parts = ceil_div(vocab, split.rows_per_part);
  return split;
}

Kernel lm_head(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
  const LmHeadSplit split = lm_head_split(target, vocab, dim, rows_per_part);
  const uint32_t wg = lm_head_workgroup(target);
  const uint32_t rows_per_wg = rows_per_workgroup(target, wg);
  KernelBuilder k("lm_head_" + std::to_string(vocab) + "x" + std::to_string(dim) + "_parts" + std::to_string(split.parts),
                  {wg, 1, 1});
  auto [x1, x4, t1, t4] = lm_head_bindings(k, dim, split.parts);
  auto logits = k.buffer<f32>("logits", Access::Write);

  auto first = let("first_row", k.workgroup_id().x() * rows_per_wg);
  auto end = let("end_row", min(first + rows_per_wg, vocab));
  auto lane0 = k.subgroup_invocation() == 0u;
  const LmHeadRows rows{split, dim, x1, x4, t1, t4};
  for_range(first + k.subgroup_id(), end, k.num_subgroups(), [&](Expr<u32> row) {
    rows.logit(k, row, [&](Expr<f32> v) { if_(lane0, [&] { logits[row] = v; }); });
  }, "row");
  return k.build();
}

Plan plan_lm_head(const OpTarget& target, uint32_t vocab, uint32_t dim) {
  return {lm_head(target, vocab, dim), fixed_grid({lm_head_workgroups(target, vocab)})};
}

Plan plan_lm_head(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
  return {lm_head(target, vocab, dim, rows_per_part), fixed_grid({lm_head_workgroups(target, vocab)})};
}

}  // namespace bdsl::ops
