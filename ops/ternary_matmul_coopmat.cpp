#include "ops/ternary_matmul_coopmat.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "ops/matrix_support.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr uint32_t kBlockCols = 128;  // one I2_S block: the columns unpacked per step
constexpr MatrixShape kShapes[] = {{16, 8, 32, ScalarKind::I8, ScalarKind::I32}, {16, 16, 32, ScalarKind::I8, ScalarKind::I32}};

struct Tiles {
  uint32_t rows, tokens, invocations;  // per workgroup
};

Tiles tiles_of(const OpTarget& t, const MatrixShape& shape, const CoopMatmulOptions& o) {
  if (o.row_blocks == 0 || o.token_blocks == 0)
    throw std::invalid_argument("ternary_matmul_coopmat: row_blocks and token_blocks must be positive");
  return {o.row_blocks * shape.m, o.token_blocks * shape.n, o.row_blocks * t.subgroup_size};
}

MatrixShape shape_or_throw(const OpTarget& t) {
  const auto shape = ternary_matmul_coopmat_shape(t);
  if (!shape)
    throw std::invalid_argument("ternary_matmul_coopmat: the target lists no cooperative-matrix shape 16x8x32 or "
                                "16x16x32 i8*i8+i32 (use ternary_matmul)");
  return *shape;
}

// Weights of rows row0.. of I2_S block `blk` as int8 -1/0/+1, row-major rows x 128.
void unpack_weights(KernelBuilder& k, const Buffer<uvec4>& w, const Shared<i8>& a_tile, Expr<u32> row0, Expr<u32> blk,
                    uint32_t rows, uint32_t cols, const Tiles& tiles) {
  for_range(k.local_index(), tiles.rows * 2, tiles.invocations, [&](Expr<u32> i) {
    // uvec4 h (0, 1) of the block: word 4h + m holds, at shift 6 - 2j, elements 32j + 16h + 4m + byte.
    auto local = let("w_row", i >> 1u);
    auto h = i & 1u;
    auto row = min(row0 + local, rows - 1u);  // rows past the end read the last one, written nowhere
    auto wv = let("wv", Expr<uvec4>(w[row * (cols / 64) + blk * 2u + h]));
    auto base = let("a_at", local * kBlockCols + h * 16u);
    for (uint32_t m = 0; m < 4; ++m)
      for (uint32_t j = 0; j < 4; ++j)
        for (uint32_t byte = 0; byte < 4; ++byte) {
          auto code = bitfield_extract(wv.lane(m), int(8 * byte + 6 - 2 * j), 2);
          a_tile[base + (32 * j + 4 * m + byte)] = cast<i8>(cast<i32>(code) - 1);
        }
  }, "w_item");
}

// The int8 activations of tokens token0.. for block `blk`, token-major tokens x 128 (0 past the end).
void unpack_activations(KernelBuilder& k, const Buffer<uvec4>& x_q, const Shared<i8>& b_tile, Expr<u32> token0,
                        Expr<u32> tokens, Expr<u32> blk, uint32_t cols, const Tiles& tiles) {
  for_range(k.local_index(), tiles.tokens * 8, tiles.invocations, [&](Expr<u32> i) {
    auto local = let("x_token", i >> 3u);
    auto c = i & 7u;
    auto token = token0 + local;
    auto valid = let("x_valid", token < tokens);
    auto qv = let("xv", Expr<uvec4>(x_q[min(token, tokens - 1u) * (cols / 16) + blk * 8u + c]));
    auto base = let("b_at", local * kBlockCols + c * 16u);
    for (uint32_t m = 0; m < 4; ++m) {
      auto word = bitcast<i32>(qv.lane(m));
      for (uint32_t byte = 0; byte < 4; ++byte)
        b_tile[base + (4 * m + byte)] = cast<i8>(select(valid, bitfield_extract(word, int(8 * byte), 8), 0));
    }
  }, "x_item");
}

template <uint32_t M, uint32_t N, uint32_t K>
Kernel build(const OpTarget& target, uint32_t rows, uint32_t cols, const CoopMatmulOptions& o) {
  const Tiles tiles = tiles_of(target, {M, N, K}, o);
  std::string name = "ternary_matmul_coopmat_" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                     "_r" + std::to_string(o.row_blocks) + "_t" + std::to_string(o.token_blocks) +
                     (o.add_residual ? "_residual" : "") + (o.write_accumulators ? "_acc" : "") + "_" +
                     std::to_string(rows) + "x" + std::to_string(cols);
  KernelBuilder k(name, {tiles.invocations, 1, 1});
  auto w = k.buffer<uvec4>("w", Access::Read);
  auto x_q = k.buffer<uvec4>("x_q", Access::Read);
  auto x_act = k.buffer<u32>("x_act", Access::Read);
  auto y = k.buffer<f32>("y", o.add_residual ? Access::ReadWrite : Access::Write);
  std::optional<Buffer<i32>> acc_out;
  if (o.write_accumulators) acc_out = k.buffer<i32>("acc", Access::Write);
  auto tokens = k.push<u32>("tokens");
  auto a_tile = k.shared<i8>("a_tile", tiles.rows * kBlockCols);
  auto b_tile = k.shared<i8>("b_tile", tiles.tokens * kBlockCols);
  auto c_tile = k.shared<i32>("c_tile", tiles.rows * tiles.tokens);

  auto row0 = let("row0", k.workgroup_id().x() * tiles.rows);
  auto token0 = let("token0", k.workgroup_id().y() * tiles.tokens);
  auto scale = let("scale", bitcast<f32>(Expr<uvec4>(w[uint32_t(uint64_t(rows) * cols / 64)]).x()));
  auto row_block = k.subgroup_id();  // this subgroup's M rows of the workgroup's

  std::vector<MatrixAcc<i32, M, N>> acc;
  for (uint32_t t = 0; t < o.token_blocks; ++t) acc.push_back(k.matrix<MatrixAcc<i32, M, N>>("acc" + std::to_string(t), 0));
  auto a = k.matrix<MatrixA<i8, M, K>>("a");
  auto b = k.matrix<MatrixB<i8, K, N>>("b");
  for_range(0u, cols / kBlockCols, [&](Expr<u32> blk) {
    unpack_weights(k, w, a_tile, row0, blk, rows, cols, tiles);
    unpack_activations(k, x_q, b_tile, token0, tokens, blk, cols, tiles);
    barrier();
    for (uint32_t kk = 0; kk < kBlockCols; kk += K) {
      a.load(a_tile, row_block * (M * kBlockCols) + kk, kBlockCols, MatrixLayout::RowMajor);
      for (uint32_t t = 0; t < o.token_blocks; ++t) {
        b.load(b_tile, t * N * kBlockCols + kk, kBlockCols, MatrixLayout::ColumnMajor);
        acc[t].mul_add(a, b);
      }
    }
    barrier();  // the tiles are rewritten next step
  }, "blk");

  // c_tile[token * rows_per_workgroup + row]: each token's rows are contiguous, as y's.
  for (uint32_t t = 0; t < o.token_blocks; ++t)
    acc[t].store(c_tile, row_block * M + t * N * tiles.rows, tiles.rows, MatrixLayout::ColumnMajor);
  barrier();
  for_range(k.local_index(), tiles.rows * tiles.tokens, tiles.invocations, [&](Expr<u32> i) {
    auto row = let("row", row0 + i % tiles.rows);
    auto token = let("token", token0 + i / tiles.rows);
    if_(row < rows && token < tokens, [&] {
      auto dot = let("dot", Expr<i32>(c_tile[i]));
      auto s = bitcast<f32>(Expr<u32>(x_act[token * 2u]));
      auto v = let("proj", cast<f32>(dot) / s * scale);  // as ternary_matmul: acc / s * scale
      auto at = let("at", token * rows + row);
      if (o.add_residual)
        y[at] = y[at] + v;
      else
        y[at] = v;
      if (acc_out) (*acc_out)[at] = dot;
    });
  }, "out");
  return k.build();
}

}  // namespace

std::optional<MatrixShape> ternary_matmul_coopmat_shape(const OpTarget& target) {
  for (const MatrixShape& s : kShapes)
    if (target.has_matrix_shape(s)) return s;
  return std::nullopt;
}

Kernel ternary_matmul_coopmat(const OpTarget& target, uint32_t rows, uint32_t cols, CoopMatmulOptions options) {
  const MatrixShape shape = shape_or_throw(target);
  if (rows == 0 || cols == 0 || cols % kBlockCols != 0)
    throw std::invalid_argument("ternary_matmul_coopmat: " + std::to_string(rows) + "x" + std::to_string(cols) +
                                ": rows must be positive and cols a positive multiple of 128");
  if (uint64_t(rows) * cols / 64 >= (1ull << 32))
    throw std::invalid_argument("ternary_matmul_coopmat: the weights are too large for 32-bit indices");
  const Tiles t = tiles_of(target, shape, options);
  const uint64_t shared = uint64_t(t.rows + t.tokens) * kBlockCols + uint64_t(t.rows) * t.tokens * 4;
  if (shared > target.max_shared_bytes || t.invocations > target.max_workgroup_invocations)
    throw std::invalid_argument("ternary_matmul_coopmat: " + std::to_string(t.rows) + " rows x " + std::to_string(t.tokens) +
                                " tokens per workgroup need " + std::to_string(shared) + " bytes of shared memory and " +
                                std::to_string(t.invocations) + " invocations: more than the target has");
  if (shape.n == 8) return build<16, 8, 32>(target, rows, cols, options);
  return build<16, 16, 32>(target, rows, cols, options);
}

uint32_t ternary_matmul_coopmat_row_groups(const OpTarget& target, uint32_t rows, const CoopMatmulOptions& options) {
  return ceil_div(rows, tiles_of(target, shape_or_throw(target), options).rows);
}

uint32_t ternary_matmul_coopmat_token_groups(const OpTarget& target, uint32_t tokens, const CoopMatmulOptions& options) {
  return ceil_div(tokens, tiles_of(target, shape_or_throw(target), options).tokens);
}

PrefillMatmul ternary_matmul_auto(const OpTarget& target, uint32_t rows, uint32_t cols, const MatmulOptions& options,
                                  MatmulEngine engine) {
  const bool cooperative = engine == MatmulEngine::CooperativeMatrix ||
                           (engine == MatmulEngine::Auto && ternary_matmul_coopmat_shape(target).has_value());
  if (!cooperative) {
    return {ternary_matmul(target, rows, cols, options), false,
            ternary_matvec_workgroups(target, rows, options.projection), options.tokens_per_workgroup};
  }
  if (options.projection.input != MatvecInput::Quantized)
    throw std::invalid_argument("ternary_matmul_auto: the tensor-core variant takes quantized activations");
  CoopMatmulOptions c;
  c.add_residual = options.projection.add_residual;
  c.write_accumulators = options.projection.write_accumulators;
  const Tiles t = tiles_of(target, shape_or_throw(target), c);
  return {ternary_matmul_coopmat(target, rows, cols, c), true, ternary_matmul_coopmat_row_groups(target, rows, c), t.tokens};
}

}  // namespace bdsl::ops
