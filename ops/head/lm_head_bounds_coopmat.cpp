#include "ops/head/lm_head_bounds_coopmat.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/matrix_support.h"
#include "ops/head/lm_head_pruned.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr uint32_t kSubgroups = 4;                 // subgroups of a workgroup, 16 rows each
constexpr uint32_t kRows = kSubgroups * 16;        // shadow rows of a workgroup
constexpr uint32_t kBlockCols = 128;               // columns staged per step
// uvec4 per staged row (a shadow row or an x): 8 hold its 128 int8, 1 is padding, so 8 rows in a
// row start in 8 different 16-byte bank groups and a tensor-core load meets no bank conflict.
constexpr uint32_t kRowWords = kBlockCols / 16 + 1;
// uvec4 per token column of the accumulators in shared memory: its kRows int32, and padding.
constexpr uint32_t kColumnWords = kRows / 4 + 1;
constexpr MatrixShape kShapes[] = {{16, 8, 32, ScalarKind::I8, ScalarKind::I32}, {16, 16, 32, ScalarKind::I8, ScalarKind::I32}};

// Shared memory of a workgroup for a group of `tokens` x: the staged block or the accumulator
// columns (one array), and each token's two halves' lower bounds.
uint64_t shared_bytes(uint32_t tokens) {
  return 16ull * std::max((kRows + tokens) * kRowWords, tokens * kColumnWords) + 8ull * tokens;
}

MatrixShape shape_or_throw(const OpTarget& t) {
  const auto shape = lm_head_bounds_coopmat_shape(t);
  if (!shape) throw std::invalid_argument("lm_head_bounds_coopmat: the target lists no cooperative-matrix shape 16x8x32 or 16x16x32 i8*i8+i32");
  return *shape;
}

template <uint32_t M, uint32_t N, uint32_t K>
Kernel build(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t token_tiles) {
  const uint32_t sg = target.subgroup_size, invocations = kSubgroups * sg;
  const uint32_t tokens_per_group = token_tiles * N;
  const uint32_t quads = dim / 16;  // uvec4 words of a row
  const uint32_t blocks = dim / kBlockCols;
  KernelBuilder k("lm_head_bounds_coopmat_" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + "_" +
                      std::to_string(vocab) + "x" + std::to_string(dim) + "_tokens" + std::to_string(tokens_per_group),
                  {invocations, 1, 1});
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
  const uint32_t a_words = kRows * kRowWords, b_words = tokens_per_group * kRowWords;
  auto tile = k.shared<uvec4>("tile", std::max(a_words + b_words, tokens_per_group * kColumnWords));
  auto halves = k.shared<f32>("half_lower", 2 * tokens_per_group);  // each token's largest lower bound per 32 rows

  auto row0 = let("row0", k.workgroup_id().x() * kRows);
  auto token0 = let("token0", k.workgroup_id().y() * tokens_per_group);
  // One 128-column block's loads, held in registers while the tensor cores work on the previous
  // one: item i of the shadow is row i / 8, uvec4 i % 8 of the block; of x, token i / 8. Rows past
  // the shadow and tokens past the batch read the last one's (written nowhere).
  std::vector<Var<uvec4>> a_stage, b_stage;
  for (uint32_t u = 0; u * invocations < kRows * 8; ++u) a_stage.push_back(k.var<uvec4>("a_stage", make_vec<u32>(0u, 0u, 0u, 0u)));
  for (uint32_t u = 0; u * invocations < tokens_per_group * 8; ++u)
    b_stage.push_back(k.var<uvec4>("b_stage", make_vec<u32>(0u, 0u, 0u, 0u)));
  auto fetch = [&](Expr<u32> blk) {
    for_invocation_items(k, kRows * 8, invocations, [&](Expr<u32> i, uint32_t u) {
      a_stage[u] = table[min(row0 + (i >> 3u), constant<u32>(vocab - 1)) * quads + blk * 8u + (i & 7u)];
    });
    for_invocation_items(k, tokens_per_group * 8, invocations, [&](Expr<u32> i, uint32_t u) {
      b_stage[u] = xq[min(token0 + (i >> 3u), tokens - 1u) * quads + blk * 8u + (i & 7u)];
    });
  };
  auto stash = [&] {
    for_invocation_items(k, kRows * 8, invocations, [&](Expr<u32> i, uint32_t u) { tile[(i >> 3u) * kRowWords + (i & 7u)] = a_stage[u]; });
    for_invocation_items(k, tokens_per_group * 8, invocations,
              [&](Expr<u32> i, uint32_t u) { tile[a_words + (i >> 3u) * kRowWords + (i & 7u)] = b_stage[u]; });
  };
  std::vector<MatrixAcc<i32, M, N>> acc;
  for (uint32_t j = 0; j < token_tiles; ++j) acc.push_back(k.matrix<MatrixAcc<i32, M, N>>("acc" + std::to_string(j), 0));
  auto a = k.matrix<MatrixA<i8, M, K>>("a");
  auto b = k.matrix<MatrixB<i8, K, N>>("b");
  auto a_at = let("a_at", k.subgroup_id() * (M * kRowWords));  // this subgroup's 16 rows
  fetch(constant<u32>(0u));
  for_range(0u, blocks, [&](Expr<u32> blk) {
    barrier();  // the previous block's tensor-core loads are done with the tile
    stash();
    barrier();
    if_(blk + 1u < blocks, [&] { fetch(blk + 1u); });
    for (uint32_t kk = 0; kk < kBlockCols / 16; kk += K / 16) {
      a.load(tile, a_at + kk, kRowWords, MatrixLayout::RowMajor);
      for (uint32_t j = 0; j < token_tiles; ++j) {
        b.load(tile, a_words + j * N * kRowWords + kk, kRowWords, MatrixLayout::ColumnMajor);  // (c, t): x t's byte c
        acc[j].mul_add(a, b);
      }
    }
  }, "blk");

  // The accumulators to shared memory: word (t * kColumnWords + r / 4), lane r % 4 holds row r of
  // the workgroup's 64 for token t of the group.
  barrier();
  for (uint32_t j = 0; j < token_tiles; ++j)
    acc[j].store(tile, k.subgroup_id() * (M / 4) + j * N * kColumnWords, kColumnWords, MatrixLayout::ColumnMajor);
  barrier();
  // Subgroup s: rows (s % 2) * 32 + lane (one each), tokens s / 2, s / 2 + 2, ...: each lane
  // writes its row's upper bound per token, and each token's largest lower bound over the 32 rows
  // goes to shared memory.
  auto lane = k.subgroup_invocation();
  auto half = let("half", k.subgroup_id() % 2u);
  auto local_row = let("local_row", half * 32u + lane);
  auto row = let("row", row0 + local_row);
  auto real_row = let("real_row", row < vocab);
  auto read_row = let("read_row", min(row, constant<u32>(vocab - 1)));
  auto s = let("row_scale", Expr<f32>(scale[read_row]));
  auto c = let("row_bound", Expr<vec2>(bound[read_row]));
  auto quarter = let("quarter", local_row % 4u);
  for (uint32_t i = 0; i < tokens_per_group / 2; ++i) {
    auto t = let("local_token", k.subgroup_id() / 2u + 2u * i);
    auto token = let("token", token0 + t);
    auto at = let("stats_at", min(token, tokens - 1u) * 4u);
    auto sx = let("sx", Expr<f32>(stats[at])), norm = let("x_norm", Expr<f32>(stats[at + 1u]));
    auto res_norm = let("residual_norm", Expr<f32>(stats[at + 2u]));
    auto word = let("word", Expr<uvec4>(tile[t * kColumnWords + local_row / 4u]));
    auto dot_q = bitcast<i32>(select(quarter == 0u, word.x(), select(quarter == 1u, word.y(), select(quarter == 2u, word.z(), word.w()))));
    const auto [approx, margin] = lm_head_row_bound(dot_q, s, c, sx, norm, res_norm);
    if_(real_row && token < tokens, [&] { upper[token * stride + row] = approx + margin; });
    auto best = subgroup_max(select(real_row, approx - margin, constant<f32>(-INFINITY)));
    if_(lane == 0u, [&] { halves[half * tokens_per_group + t] = best; });
  }
  barrier();
  for (uint32_t u = 0; u * invocations < tokens_per_group; ++u) {
    auto t = let("group_token", k.local_index() + u * invocations);
    if_(t < tokens_per_group && token0 + t < tokens, [&] {
      lower[(token0 + t) * lower_count + k.workgroup_id().x()] = max(Expr<f32>(halves[t]), Expr<f32>(halves[tokens_per_group + t]));
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
  return lm_head_bounds_coopmat_shape(target) && parts == 1 && vocab > 0 && dim > 0 && dim % kBlockCols == 0 &&
         target.subgroup_size == 32 && kSubgroups * 32 <= target.max_workgroup_invocations &&
         shared_bytes(kLmHeadBoundsCoopmatTokens) <= target.max_shared_bytes;
}

uint32_t lm_head_bounds_coopmat_workgroups(const OpTarget&, uint32_t vocab) { return ceil_div(vocab, kRows); }

namespace {
// x a grid row takes: min(tokens, 64) rounded up to the shape's N.
uint32_t group_tokens(const MatrixShape& shape, uint32_t tokens) {
  return ceil_div(std::min(std::max(tokens, 1u), kLmHeadBoundsCoopmatTokens), shape.n) * shape.n;
}
}  // namespace

Kernel lm_head_bounds_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens) {
  const MatrixShape shape = shape_or_throw(target);
  if (vocab == 0 || dim == 0 || dim % kBlockCols != 0)
    throw std::invalid_argument("lm_head_bounds_coopmat: vocab " + std::to_string(vocab) + " x dim " + std::to_string(dim) +
                                ": dim must be a positive multiple of 128");
  if (target.subgroup_size != 32)
    throw std::invalid_argument("lm_head_bounds_coopmat: subgroups of 32 invocations (the target has " +
                                std::to_string(target.subgroup_size) + ")");
  if (uint64_t(vocab) * dim / 16 >= (1ull << 32))
    throw std::invalid_argument("lm_head_bounds_coopmat: the shadow is too large for 32-bit indices");
  const uint32_t token_tiles = group_tokens(shape, tokens) / shape.n;
  if (shape.n == 8) return build<16, 8, 32>(target, vocab, dim, token_tiles);
  return build<16, 16, 32>(target, vocab, dim, token_tiles);
}

Plan plan_lm_head_bounds_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens) {
  const uint32_t groups = lm_head_bounds_coopmat_workgroups(target, vocab);
  const uint32_t per_group = group_tokens(shape_or_throw(target), tokens);
  return {lm_head_bounds_coopmat(target, vocab, dim, tokens), [groups, per_group](uint32_t count) {
            if (count == 0) throw std::invalid_argument("lm_head_bounds_coopmat: a dispatch of no x");
            return rt::Grid{groups, ceil_div(count, per_group)};
          }};
}

}  // namespace bdsl::ops
