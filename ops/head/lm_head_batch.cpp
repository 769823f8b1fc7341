#include "ops/head/lm_head_batch.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/matrix_support.h"
#include "ops/head/lm_head.h"
#include "ops/tuning.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr uint32_t kRowsPerSubgroup = 2;  // rows a subgroup keeps in registers
constexpr uint32_t kMaxTileTokens = 8;

uint32_t workgroup_of(const OpTarget& t) { return subgroup_multiple_workgroup(t, tuning_for(t).lm_head_batch_workgroup); }
uint32_t subgroups_of(const OpTarget& t) { return workgroup_of(t) / std::max(1u, t.subgroup_size); }

// Tokens whose x rows fit half the shared memory at once (at least one): with more, fewer
// workgroups fit a multiprocessor and the head gets slower (bench/RESULTS.md run 12).
uint32_t tile_tokens(const OpTarget& t, uint32_t dim) {
  const uint32_t fit = std::max<uint32_t>(t.max_shared_bytes / 2 / (dim * 4), 1);
  return std::min(fit, kMaxTileTokens);
}

}  // namespace

uint32_t lm_head_batch_workgroups(const OpTarget& target, uint32_t vocab) {
  return ceil_div(vocab, subgroups_of(target) * kRowsPerSubgroup);
}

Kernel lm_head_batch(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
  if (dim % 8 != 0) throw std::invalid_argument("lm_head_batch: dim " + std::to_string(dim) + " is not a multiple of 8");
  const LmHeadSplit split = lm_head_split(target, vocab, dim, rows_per_part);
  if (uint64_t(dim) * 4 > target.max_shared_bytes / 2)
    throw std::invalid_argument("lm_head_batch: one x row of " + std::to_string(dim) + " floats does not fit half the shared memory");
  const uint32_t wg = workgroup_of(target), sg = std::max(1u, target.subgroup_size);
  const uint32_t quads = dim / 8, x_vecs = dim / 4, tile = tile_tokens(target, dim);
  const uint32_t slots = ceil_div(quads, sg);  // quads per lane
  KernelBuilder k("lm_head_batch_" + std::to_string(vocab) + "x" + std::to_string(dim) + "_parts" + std::to_string(split.parts) +
                      "_t" + std::to_string(tile),
                  {wg, 1, 1});
  auto x = k.buffer<vec4>("x", Access::Read);
  std::vector<Buffer<uvec4>> table;
  for (uint32_t p = 0; p < split.parts; ++p) table.push_back(k.buffer<uvec4>("table" + std::to_string(p), Access::Read));
  auto logits = k.buffer<f32>("logits", Access::Write);
  auto tokens = k.push<u32>("tokens");
  auto stride = k.push<u32>("stride");
  auto xs = k.shared<vec4>("x_tile", tile * x_vecs);

  auto lane = k.subgroup_invocation();
  auto lid = k.local_index();
  // The subgroup's rows (clamped for the loads; only real rows are written).
  std::vector<Expr<u32>> rows;
  for (uint32_t j = 0; j < kRowsPerSubgroup; ++j)
    rows.push_back(let("row", (k.workgroup_id().x() * subgroups_of(target) + k.subgroup_id()) * kRowsPerSubgroup + j));
  // Quad i = lane + q * sg of each row, in registers for the whole kernel (0 past the row's end).
  std::vector<std::vector<Var<uvec4>>> h(kRowsPerSubgroup);
  for (uint32_t j = 0; j < kRowsPerSubgroup; ++j) {
    for (uint32_t q = 0; q < slots; ++q) h[j].push_back(k.var<uvec4>("h", make_vec<u32>(0u, 0u, 0u, 0u)));
    for_row_part(split, min(rows[j], constant<u32>(vocab - 1)), [&](uint32_t p, Expr<u32> local) {
      for (uint32_t q = 0; q < slots; ++q) {
        auto i = lane + q * sg;
        if (quads % sg == 0)
          h[j][q] = table[p][local * quads + i];
        else
          if_(i < quads, [&] { h[j][q] = table[p][local * quads + i]; });
      }
    });
  }
  // The next tile's x is read into registers while the subgroups work on this one (the reads'
  // latency is hidden behind the tile's products), then stored to shared memory. Each token's x
  // goes in as two halves, every quad's low vec4 then every quad's high one, so that a subgroup
  // reads consecutive vec4s (x as it is would put two lanes on each bank).
  const uint32_t tile_vecs = tile * x_vecs, per_lane = ceil_div(tile_vecs, wg);
  std::vector<Var<vec4>> next;
  for (uint32_t m = 0; m < per_lane; ++m) next.push_back(k.var<vec4>("x_next", make_vec<f32>(0.0f, 0.0f, 0.0f, 0.0f)));
  auto for_each_vec = [&](const std::function<void(uint32_t, Expr<u32>)>& body) {
    for (uint32_t m = 0; m < per_lane; ++m) {
      auto i = let("tile_vec", lid + m * wg);
      if (tile_vecs % wg == 0)
        body(m, i);
      else
        if_(i < tile_vecs, [&] { body(m, i); });
    }
  };
  auto fetch = [&](Expr<u32> t0) {  // tokens past the last read as zeros (from the last, in bounds)
    for_each_vec([&](uint32_t m, Expr<u32> i) {
      auto t = let("tile_token", t0 + i / x_vecs);
      next[m] = select(t < tokens, Expr<vec4>(x[min(t, tokens - 1u) * x_vecs + i % x_vecs]), make_vec<f32>(0.0f, 0.0f, 0.0f, 0.0f));
    });
  };
  if_(tokens > 0u, [&] { fetch(constant<u32>(0)); });
  for_range(constant<u32>(0), tokens, constant<u32>(tile), [&](Expr<u32> t0) {
    barrier();  // the previous tile's reads are done
    for_each_vec([&](uint32_t m, Expr<u32> i) {
      auto v = let("x_vec", i % x_vecs);
      xs[(i / x_vecs) * x_vecs + (v % 2u) * quads + v / 2u] = Expr<vec4>(next[m]);
    });
    barrier();
    fetch(t0 + tile);
    // Quad by quad, each token's x read once for every row; every (row, token) sum still runs
    // over the lane's quads in ascending order, then over the subgroup: lm_head's arithmetic.
    std::vector<std::vector<Var<f32>>> acc(kRowsPerSubgroup);
    for (auto& row_acc : acc)
      for (uint32_t tt = 0; tt < tile; ++tt) row_acc.push_back(k.var<f32>("acc", 0.0f));
    for (uint32_t q = 0; q < slots; ++q) {
      auto i = lane + q * sg;
      auto body = [&] {
        std::vector<Expr<vec4>> x_lo, x_hi;
        for (uint32_t tt = 0; tt < tile; ++tt) {
          x_lo.push_back(let("x_lo", Expr<vec4>(xs[tt * x_vecs + i])));
          x_hi.push_back(let("x_hi", Expr<vec4>(xs[tt * x_vecs + quads + i])));
        }
        for (uint32_t j = 0; j < kRowsPerSubgroup; ++j) {
          Expr<uvec4> t = h[j][q];
          auto a = let("h01", unpack_half2x16(t.x())), b = let("h23", unpack_half2x16(t.y()));
          auto c = let("h45", unpack_half2x16(t.z())), d = let("h67", unpack_half2x16(t.w()));
          auto lo = let("w_lo", make_vec<f32>(a.x(), a.y(), b.x(), b.y()));
          auto hi = let("w_hi", make_vec<f32>(c.x(), c.y(), d.x(), d.y()));
          for (uint32_t tt = 0; tt < tile; ++tt) acc[j][tt] += dot(lo, x_lo[tt]) + dot(hi, x_hi[tt]);
        }
      };
      if (quads % sg == 0)
        body();
      else
        if_(i < quads, body);
    }
    for (uint32_t j = 0; j < kRowsPerSubgroup; ++j)
      for (uint32_t tt = 0; tt < tile; ++tt) {
        auto v = let("logit", subgroup_add(Expr<f32>(acc[j][tt])));
        if_(lane == 0u && rows[j] < vocab && t0 + tt < tokens, [&] { logits[(t0 + tt) * stride + rows[j]] = v; });
      }
  }, "t0");
  return k.build();
}

Plan plan_lm_head_batch(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
  return {lm_head_batch(target, vocab, dim, rows_per_part), fixed_grid({lm_head_batch_workgroups(target, vocab)})};
}

}  // namespace bdsl::ops
