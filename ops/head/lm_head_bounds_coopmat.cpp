#include "ops/head/lm_head_bounds_coopmat.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/matrix_support.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr uint32_t kSubgroups = 4;     // subgroups of a workgroup
constexpr uint32_t kRowTiles = 2;      // 16-row tiles a subgroup multiplies together (32 rows)
constexpr uint32_t kPasses = 2;        // 32-row passes of each subgroup: 256 rows a workgroup
constexpr uint32_t kUnroll = 2;        // K steps whose shadow loads are issued together
constexpr uint32_t kSubgroupRows = 16 * kRowTiles;
constexpr uint32_t kWorkgroupRows = kSubgroups * kPasses * kSubgroupRows;
// uvec4 words per token column of a subgroup's accumulators in shared memory: its 32 int32, and
// one word of padding so the columns start in different banks.
constexpr uint32_t kColumnWords = kSubgroupRows / 4 + 1;
constexpr MatrixShape kShapes[] = {{16, 8, 32, ScalarKind::I8, ScalarKind::I32}, {16, 16, 32, ScalarKind::I8, ScalarKind::I32}};

MatrixShape shape_or_throw(const OpTarget& t) {
  const auto shape = lm_head_bounds_coopmat_shape(t);
  if (!shape) throw std::invalid_argument("lm_head_bounds_coopmat: the target lists no cooperative-matrix shape 16x8x32 or 16x16x32 i8*i8+i32");
  return *shape;
}

template <uint32_t M, uint32_t N, uint32_t K>
Kernel build(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t token_tiles) {
  const uint32_t sg = target.subgroup_size;
  const uint32_t tokens_per_group = token_tiles * N;
  const uint32_t quads = dim / 16;  // uvec4 words of a row
  KernelBuilder k("lm_head_bounds_coopmat_" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + "_" +
                      std::to_string(vocab) + "x" + std::to_string(dim) + "_tokens" + std::to_string(tokens_per_group),
                  {kSubgroups * sg, 1, 1});
  auto xq = k.buffer<uvec4>("xq", Access::Read);
  auto stats = k.buffer<f32>("stats", Access::Read);
  auto table = k.buffer<uvec4>("table0", Access::Read);
  auto scale = k.buffer<f32>("scale", Access::Read);
  auto bound = k.buffer<vec2>("bound", Access::Read);
  auto upper = k.buffer<f32>("upper", Access::Write);
  auto lower = k.buffer<f32>("lower", Access::Write);
  auto tokens = k.push<u32>("tokens");
  auto stride = k.push<u32>("stride");
  const uint32_t lower_count = lm_head_bounds_coopmat_workgroups(target, vocab);
  auto columns = k.shared<uvec4>("columns", kSubgroups * tokens_per_group * kColumnWords);
  auto lowest = k.shared<f32>("group_lower", kSubgroups * tokens_per_group);  // each subgroup's, per token

  auto lane = k.subgroup_invocation();
  auto token0 = let("token0", k.workgroup_id().y() * tokens_per_group);
  auto region = let("region", k.subgroup_id() * (tokens_per_group * kColumnWords));
  for (uint32_t t = 0; t * sg * kSubgroups < tokens_per_group * kSubgroups; ++t) {  // no lower bound yet
    auto i = k.local_index() + t * sg * kSubgroups;
    if_(i < kSubgroups * tokens_per_group, [&] { lowest[i] = constant<f32>(-INFINITY); });
  }

  const uint32_t tiles = ceil_div(vocab, M);
  std::vector<MatrixAcc<i32, M, N>> acc;
  for (uint32_t i = 0; i < kRowTiles * token_tiles; ++i) acc.push_back(k.matrix<MatrixAcc<i32, M, N>>("acc" + std::to_string(i), 0));
  std::vector<MatrixA<i8, M, K>> a;
  for (uint32_t i = 0; i < kUnroll * kRowTiles; ++i) a.push_back(k.matrix<MatrixA<i8, M, K>>("a" + std::to_string(i)));
  auto b = k.matrix<MatrixB<i8, K, N>>("b");
  for (uint32_t pass = 0; pass < kPasses; ++pass) {
    // This pass's tiles; the last tile starts at vocab - 16 and tiles past it repeat it, so every
    // load is in range (rows computed twice are written twice with the same values).
    const uint32_t first_tile = pass * kSubgroups * kRowTiles;
    std::vector<Expr<u32>> row0;
    for (uint32_t i = 0; i < kRowTiles; ++i) {
      auto tile = min(k.workgroup_id().x() * (kWorkgroupRows / M) + first_tile + k.subgroup_id() * kRowTiles + i,
                      constant<u32>(tiles - 1));
      row0.push_back(let("row0", min(tile * M, constant<u32>(vocab - M))));
    }
    for (auto& c : acc) c.fill(0);
    // kUnroll K steps a loop iteration, every shadow tile's load issued before the products: more
    // of the shadow in flight.
    for_range(0u, quads, kUnroll * K / 16, [&](Expr<u32> quad0) {
      for (uint32_t u = 0; u < kUnroll; ++u)
        for (uint32_t i = 0; i < kRowTiles; ++i)
          a[u * kRowTiles + i].load(table, row0[i] * quads + quad0 + u * (K / 16), quads, MatrixLayout::RowMajor);
      for (uint32_t u = 0; u < kUnroll; ++u)
        for (uint32_t j = 0; j < token_tiles; ++j) {
          // Element (c, t) = byte c of this K step of xq row token0 + j N + t.
          b.load(xq, (token0 + j * N) * quads + quad0 + u * (K / 16), quads, MatrixLayout::ColumnMajor);
          for (uint32_t i = 0; i < kRowTiles; ++i) acc[i * token_tiles + j].mul_add(a[u * kRowTiles + i], b);
        }
    }, "quad");
    // The accumulators to shared memory: word (region + t * kColumnWords + r / 4), lane r % 4 holds
    // row r of the subgroup's 32 for token t of the group.
    barrier();  // the previous pass's lanes are done with the columns
    for (uint32_t i = 0; i < kRowTiles; ++i)
      for (uint32_t j = 0; j < token_tiles; ++j)
        acc[i * token_tiles + j].store(columns, region + (i * M / 4 + j * N * kColumnWords), kColumnWords, MatrixLayout::ColumnMajor);
    barrier();
    // A lane per row: its bound for every token, and each token's largest lower bound.
    for (uint32_t u = 0; u * sg < kSubgroupRows; ++u) {
      auto r = let("local_row", lane + u * sg);
      auto has_row = r < kSubgroupRows;
      auto in_tile = let("in_tile", min(r, constant<u32>(kSubgroupRows - 1)));
      Expr<u32> row = row0[0] + in_tile;
      for (uint32_t i = 1; i < kRowTiles; ++i) row = select(in_tile >= i * M, row0[i] + (in_tile - i * M), row);
      row = let("row", row);
      auto s = let("row_scale", Expr<f32>(scale[row]));
      auto c = let("row_bound", Expr<vec2>(bound[row]));
      for (uint32_t t = 0; t < tokens_per_group; ++t) {
        // The token's sx and norms, read where used (tokens past the batch read the last one's).
        auto token = let("token", token0 + t);
        auto at = let("stats_at", min(token, tokens - 1u) * 4u);
        auto sx = let("sx", Expr<f32>(stats[at])), norm = let("x_norm", Expr<f32>(stats[at + 1u]));
        auto res_norm = let("residual_norm", Expr<f32>(stats[at + 2u]));
        auto word = let("word", Expr<uvec4>(columns[region + t * kColumnWords + in_tile / 4u]));
        auto lane_word = select(in_tile % 4u == 0u, word.x(), select(in_tile % 4u == 1u, word.y(),
                                                                    select(in_tile % 4u == 2u, word.z(), word.w())));
        auto dot_q = bitcast<i32>(lane_word);
        auto approx = let("approx", (cast<f32>(dot_q) * s) * sx);  // lm_head_bounds' expression
        auto margin = let("margin", c.x() * norm + c.y() * res_norm + abs(approx) * 1e-6f);
        if_(has_row && token < tokens, [&] { upper[(token0 + t) * stride + row] = approx + margin; });
        auto best = subgroup_max(select(has_row, approx - margin, constant<f32>(-INFINITY)));
        if_(lane == 0u, [&] {
          auto at = k.subgroup_id() * tokens_per_group + t;
          lowest[at] = max(Expr<f32>(lowest[at]), best);
        });
      }
    }
  }
  // Each token's largest lower bound over the workgroup's subgroups.
  barrier();
  for (uint32_t t = 0; t * sg * kSubgroups < tokens_per_group; ++t) {
    auto local = let("local_token", k.local_index() + t * sg * kSubgroups);
    if_(local < tokens_per_group && token0 + local < tokens, [&] {
      Expr<f32> m = lowest[local];
      for (uint32_t s = 1; s < kSubgroups; ++s) m = max(m, Expr<f32>(lowest[local + s * tokens_per_group]));
      lower[(token0 + local) * lower_count + k.workgroup_id().x()] = m;
    });
  }
  return k.build();
}

}  // namespace

std::optional<MatrixShape> lm_head_bounds_coopmat_shape(const OpTarget& target) {
  for (const MatrixShape& s : kShapes)
    if (target.has_matrix_shape(s)) return s;
  return std::nullopt;
}

bool lm_head_bounds_coopmat_fits(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t parts) {
  return lm_head_bounds_coopmat_shape(target) && parts == 1 && vocab >= 32 && dim > 0 && dim % 64 == 0 &&
         target.subgroup_size >= 1 && kSubgroups * target.subgroup_size <= target.max_workgroup_invocations;
}

uint32_t lm_head_bounds_coopmat_rows(const OpTarget& target, uint32_t tokens) {
  const uint32_t n = shape_or_throw(target).n;
  const uint32_t per_group = ceil_div(std::min(std::max(tokens, 1u), kLmHeadBoundsCoopmatTokens), n) * n;
  return ceil_div(std::max(tokens, 1u), per_group) * per_group;
}

uint32_t lm_head_bounds_coopmat_workgroups(const OpTarget&, uint32_t vocab) { return ceil_div(vocab, kWorkgroupRows); }

Kernel lm_head_bounds_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens) {
  const MatrixShape shape = shape_or_throw(target);
  if (vocab < 32 || dim == 0 || dim % 64 != 0)
    throw std::invalid_argument("lm_head_bounds_coopmat: vocab " + std::to_string(vocab) + " x dim " + std::to_string(dim) +
                                ": vocab must be at least 32 and dim a positive multiple of 64");
  if (uint64_t(vocab) * dim / 16 >= (1ull << 32))
    throw std::invalid_argument("lm_head_bounds_coopmat: the shadow is too large for 32-bit indices");
  const uint32_t token_tiles = ceil_div(std::min(std::max(tokens, 1u), kLmHeadBoundsCoopmatTokens), shape.n);
  if (shape.n == 8) return build<16, 8, 32>(target, vocab, dim, token_tiles);
  return build<16, 16, 32>(target, vocab, dim, token_tiles);
}

Plan plan_lm_head_bounds_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens) {
  const uint32_t groups = lm_head_bounds_coopmat_workgroups(target, vocab);
  const uint32_t per_group = lm_head_bounds_coopmat_rows(target, std::min(tokens, kLmHeadBoundsCoopmatTokens));
  return {lm_head_bounds_coopmat(target, vocab, dim, tokens),
          [groups, per_group](uint32_t count) { return rt::Grid{groups, ceil_div(std::max(count, 1u), per_group)}; }};
}

}  // namespace bdsl::ops
