#include "ops/ternary/ternary_matmul_fragments.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "ops/ternary/coopmat_pieces.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

// The element of an invocation's share that holds PTX's fragment element p (OpTarget::int8_fragments).
template <size_t N>
uint32_t element_of(const std::array<uint8_t, N>& order, uint32_t p) {
  for (uint32_t i = 0; i < N; ++i)
    if (order[i] == p) return i;
  throw std::logic_error("ternary_matmul_fragments: a fragment order that is not a permutation");
}

// PTX's fragment elements first..first+3 of m from the bytes of a word, lowest byte first.
template <class M, size_t N>
void set_bytes(const M& m, const std::array<uint8_t, N>& order, uint32_t first, const Expr<u32>& word) {
  for (uint32_t b = 0; b < 4; ++b) m.set_element(element_of(order, first + b), cast<i8>(b == 0 ? word : word >> (8 * b)));
}

}  // namespace

Kernel ternary_matmul_fragments(const OpTarget& target, uint32_t rows, uint32_t cols, const CoopMatmulOptions& o) {
  constexpr uint32_t M = 16, N = 8, K = 32;
  if (!target.int8_fragments || target.subgroup_size != 32)
    throw std::invalid_argument("ternary_matmul_fragments: the target's int8 matrices are not known to hold PTX's fragments");
  const Int8FragmentOrder& order = *target.int8_fragments;
  if (o.double_buffer || o.k_splits > 1 || o.row_subgroups == 0 || o.token_subgroups == 0 || o.row_tiles == 0 ||
      o.token_tiles == 0)
    throw std::invalid_argument("ternary_matmul_fragments: positive subgroups and tiles, no double_buffer or k_splits");
  const bool gate_up = o.gate_up.has_value();
  if (gate_up && (o.row_tiles % 2 != 0 || o.add_residual || o.write_accumulators))
    throw std::invalid_argument("ternary_matmul_fragments: gate_up takes an even row_tiles (half gate's, half up's), no "
                                "residual or accumulators");
  const uint32_t a_tiles = o.row_tiles;                  // weight tiles a subgroup multiplies
  const uint32_t out_tiles = gate_up ? a_tiles / 2 : a_tiles;  // the output rows' tiles
  const uint32_t sub_rows = out_tiles * M, wg_rows = o.row_subgroups * sub_rows;
  const uint32_t sub_tokens = o.token_tiles * N, wg_tokens = o.token_subgroups * sub_tokens;
  const uint32_t invocations = o.row_subgroups * o.token_subgroups * 32;
  if (invocations > target.max_workgroup_invocations)
    throw std::invalid_argument("ternary_matmul_fragments: " + std::to_string(invocations) + " invocations: more than the target has");
  std::string name = "ternary_matmul_fragments_" + std::to_string(wg_rows) + "x" + std::to_string(wg_tokens) + "_sg" +
                     std::to_string(o.row_subgroups) + "x" + std::to_string(o.token_subgroups) + "_t" +
                     std::to_string(o.row_tiles) + "x" + std::to_string(o.token_tiles) +
                     (o.add_residual ? "_residual" : "") + (o.write_accumulators ? "_acc" : "") +
                     (gate_up ? "_" + to_string(*o.gate_up) + "_gate_up" : "") + "_" + std::to_string(rows) + "x" +
                     std::to_string(cols);
  KernelBuilder k(name, {invocations, 1, 1});
  // The same buffers as ternary_matmul_coopmat's, read 8 bytes at a time.
  auto w = k.buffer<uvec2>(gate_up ? "w_gate" : "w", Access::Read);
  std::optional<Buffer<uvec2>> w_up;
  if (gate_up) w_up = k.buffer<uvec2>("w_up", Access::Read);
  auto x_q = k.buffer<uvec2>("x_q", Access::Read);
  auto x_act = k.buffer<u32>("x_act", Access::Read);
  auto y = k.buffer<f32>("y", o.add_residual ? Access::ReadWrite : Access::Write);
  std::optional<Buffer<i32>> acc_out;
  if (o.write_accumulators) acc_out = k.buffer<i32>("acc", Access::Write);
  auto tokens = k.push<u32>("tokens");

  auto sg = k.subgroup_id();
  auto lane = k.subgroup_invocation();
  auto g = let("g", lane >> 2u);
  auto t = let("t", lane & 3u);
  auto row0 = let("row0", k.workgroup_id().x() * wg_rows + (sg % o.row_subgroups) * sub_rows);
  auto token0 = let("token0", k.workgroup_id().y() * wg_tokens + (sg / o.row_subgroups) * sub_tokens);
  const uint32_t row_words = cols / 32;   // uvec2 a weight row
  const uint32_t token_words = cols / 8;  // uvec2 a token
  const uint32_t scale_at = uint32_t(uint64_t(rows) * cols / 32);
  auto scale = let("scale", bitcast<f32>(Expr<uvec2>(w[scale_at]).x()));
  std::optional<Expr<f32>> up_scale;
  if (w_up) up_scale = let("up_scale", bitcast<f32>(Expr<uvec2>((*w_up)[scale_at]).x()));

  // Where each weight tile's rows g and g + 8 start (rows past the end read the last one, written
  // nowhere), and each token tile's token g (likewise).
  auto weights_of = [&](uint32_t i) -> const Buffer<uvec2>& { return gate_up && i >= out_tiles ? *w_up : w; };
  std::vector<std::array<Expr<u32>, 2>> a_at;
  for (uint32_t i = 0; i < a_tiles; ++i) {
    const uint32_t tile_row = (i % out_tiles) * M;
    std::array<Expr<u32>, 2> at{constant<u32>(0u), constant<u32>(0u)};
    for (uint32_t h = 0; h < 2; ++h)
      at[h] = let("a_at", min(row0 + (tile_row + 8 * h) + g, rows - 1u) * row_words + t);
    a_at.push_back(at);
  }
  std::vector<Expr<u32>> b_at;
  for (uint32_t j = 0; j < o.token_tiles; ++j)
    b_at.push_back(let("b_at", min(token0 + j * N + g, tokens - 1u) * token_words + t));

  std::vector<MatrixAcc<i32, M, N>> acc;
  for (uint32_t i = 0; i < a_tiles * o.token_tiles; ++i) acc.push_back(k.matrix<MatrixAcc<i32, M, N>>("acc" + std::to_string(i), 0));
  std::vector<MatrixA<i8, M, K>> a;
  std::vector<MatrixB<i8, K, N>> b;
  for (uint32_t i = 0; i < a_tiles; ++i) a.push_back(k.matrix<MatrixA<i8, M, K>>("a" + std::to_string(i)));
  for (uint32_t j = 0; j < o.token_tiles; ++j) b.push_back(k.matrix<MatrixB<i8, K, N>>("b" + std::to_string(j)));

  for_range(0u, cols / kBlockCols, [&](Expr<u32> blk) {
    std::vector<std::array<Expr<uvec2>, 2>> codes;  // this block's 8 bytes of rows g and g + 8, per tile
    for (uint32_t i = 0; i < a_tiles; ++i)
      codes.push_back({let("codes", Expr<uvec2>(weights_of(i)[a_at[i][0] + blk * 4u])),
                       let("codes", Expr<uvec2>(weights_of(i)[a_at[i][1] + blk * 4u]))});
    for (uint32_t s = 0; s < kBlockCols / K; ++s) {
      for (uint32_t j = 0; j < o.token_tiles; ++j) {
        auto x = let("x", Expr<uvec2>(x_q[b_at[j] + blk * 16u + s * 4u]));
        set_bytes(b[j], order.b, 0, x.x());
        set_bytes(b[j], order.b, 4, x.y());
      }
      const uint32_t shift = 6 - 2 * s;
      for (uint32_t i = 0; i < a_tiles; ++i) {
        set_bytes(a[i], order.a, 0, let("a_lo", ternary_bytes(codes[i][0].x(), shift)));
        set_bytes(a[i], order.a, 4, let("a_lo8", ternary_bytes(codes[i][1].x(), shift)));
        set_bytes(a[i], order.a, 8, let("a_hi", ternary_bytes(codes[i][0].y(), shift)));
        set_bytes(a[i], order.a, 12, let("a_hi8", ternary_bytes(codes[i][1].y(), shift)));
        for (uint32_t j = 0; j < o.token_tiles; ++j) acc[i * o.token_tiles + j].mul_add(a[i], b[j]);
      }
    }
  }, "blk");

  // PTX's element e of an accumulator: row g + 8 * (e / 2), token 2t + e % 2 of its tile.
  for (uint32_t j = 0; j < o.token_tiles; ++j)
    for (uint32_t p = 0; p < 2; ++p) {
      auto token = let("token", token0 + j * N + 2u * t + p);
      auto s = let("s", bitcast<f32>(Expr<u32>(x_act[min(token, tokens - 1u) * 2u])));
      if_(token < tokens, [&] {
        for (uint32_t i = 0; i < out_tiles; ++i)
          for (uint32_t half = 0; half < 2; ++half) {
            const uint32_t e = 2 * half + p;
            auto row = let("row", row0 + (i * M + 8 * half) + g);
            if_(row < rows, [&] {
              auto at = let("at", token * rows + row);
              auto dot = let("dot", acc[i * o.token_tiles + j].element(element_of(order.c, e)));
              if (gate_up) {
                auto gate = let("gate", cast<f32>(dot) / s * scale);
                auto up = let("up", cast<f32>(Expr<i32>(acc[(i + out_tiles) * o.token_tiles + j].element(element_of(order.c, e)))) / s * *up_scale);
                y[at] = gate_product(*o.gate_up, gate, up);
                return;
              }
              write_projection(y, acc_out, o.add_residual, at, dot, s, scale);
            });
          }
      });
    }
  return k.build();
}

}  // namespace bdsl::ops
