#include "ops/head/lm_head_coopmat.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/matrix_support.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr uint32_t kSubgroups = 4;  // subgroups of a workgroup, 16 rows each
constexpr MatrixShape kShapes[] = {{16, 8, 16, ScalarKind::F16, ScalarKind::F32}, {16, 16, 16, ScalarKind::F16, ScalarKind::F32}};

MatrixShape shape_or_throw(const OpTarget& t) {
  const auto shape = lm_head_coopmat_shape(t);
  if (!shape) throw std::invalid_argument("lm_head_coopmat: the target lists no cooperative-matrix shape 16x8x16 or 16x16x16 f16*f16+f32");
  return *shape;
}

template <uint32_t M, uint32_t N, uint32_t K>
Kernel build(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t token_tiles) {
  const uint32_t sg = target.subgroup_size;
  KernelBuilder k("lm_head_coopmat_" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + "_" +
                      std::to_string(vocab) + "x" + std::to_string(dim) + "_tokens" + std::to_string(token_tiles * N),
                  {kSubgroups * sg, 1, 1});
  auto x = k.buffer<f16>("x", Access::Read);
  auto table = k.buffer<f16>("table0", Access::Read);
  auto logits = k.buffer<f32>("logits", Access::Write);
  auto stride = k.push<u32>("stride");
  // The subgroup's 16 rows; the last tile starts at vocab - 16, so every load is in range (rows
  // computed twice are written twice with the same values).
  const uint32_t tiles = ceil_div(vocab, M);
  auto tile = let("tile", min(k.workgroup_id().x() * kSubgroups + k.subgroup_id(), constant<u32>(tiles - 1)));
  auto row0 = let("row0", min(tile * M, constant<u32>(vocab - M)));
  using Acc = MatrixAcc<f32, M, N>;
  std::vector<Acc> acc;
  for (uint32_t j = 0; j < token_tiles; ++j) acc.push_back(k.matrix<Acc>("acc", 0.0f));
  auto a = k.matrix<MatrixA<f16, M, K>>("a");
  auto b = k.matrix<MatrixB<f16, K, N>>("b");
  for_range(0u, dim, K, [&](Expr<u32> col) {
    a.load(table, row0 * dim + col, dim, MatrixLayout::RowMajor);
    for (uint32_t j = 0; j < token_tiles; ++j) {
      b.load(x, col + j * N * dim, dim, MatrixLayout::ColumnMajor);  // element (c, t) = x[t][col + c]
      acc[j].mul_add(a, b);
    }
  }, "col");
  for (uint32_t j = 0; j < token_tiles; ++j)
    acc[j].store(logits, row0 + stride * (j * N), stride, MatrixLayout::ColumnMajor);  // (r, t) at t * stride + r
  return k.build();
}

}  // namespace

std::optional<MatrixShape> lm_head_coopmat_shape(const OpTarget& target) {
  for (const MatrixShape& s : kShapes)
    if (target.has_matrix_shape(s)) return s;
  return std::nullopt;
}

bool lm_head_coopmat_fits(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t parts) {
  return lm_head_coopmat_shape(target) && parts == 1 && vocab >= 16 && dim % 16 == 0;
}

uint32_t lm_head_coopmat_tokens(const OpTarget& target, uint32_t tokens) {
  const uint32_t n = shape_or_throw(target).n;
  return ceil_div(std::max(tokens, 1u), n) * n;
}

uint32_t lm_head_coopmat_workgroups(const OpTarget& target, uint32_t vocab) {
  return ceil_div(ceil_div(vocab, shape_or_throw(target).m), kSubgroups);
}

Kernel lm_head_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens) {
  const MatrixShape shape = shape_or_throw(target);
  if (vocab < 16 || dim == 0 || dim % 16 != 0)
    throw std::invalid_argument("lm_head_coopmat: vocab " + std::to_string(vocab) + " x dim " + std::to_string(dim) +
                                ": vocab must be at least 16 and dim a positive multiple of 16");
  if (uint64_t(vocab) * dim >= (1ull << 32))
    throw std::invalid_argument("lm_head_coopmat: the table is too large for 32-bit indices");
  const uint32_t token_tiles = lm_head_coopmat_tokens(target, tokens) / shape.n;
  if (shape.n == 8) return build<16, 8, 16>(target, vocab, dim, token_tiles);
  return build<16, 16, 16>(target, vocab, dim, token_tiles);
}

Plan plan_lm_head_coopmat(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t tokens) {
  return {lm_head_coopmat(target, vocab, dim, tokens), fixed_grid({lm_head_coopmat_workgroups(target, vocab)})};
}

}  // namespace bdsl::ops
