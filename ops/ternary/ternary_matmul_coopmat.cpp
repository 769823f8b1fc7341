#include "ops/ternary/ternary_matmul_coopmat.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/handoff.h"
#include "ops/common/matrix_support.h"
#include "ops/ternary/coopmat_pieces.h"
#include "ops/ternary/ternary_matmul_fragments.h"
#include "ops/tuning.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

// uvec4 per staged row (a weight row or a token): 8 hold its 128 int8, 1 is padding, so 8 rows
// in a row start in 8 different 16-byte bank groups and a tensor-core load of 8 rows x 16 bytes
// meets no bank conflict.
constexpr uint32_t kRowWords = kBlockCols / 16 + 1;
constexpr MatrixShape kShapes[] = {{16, 8, 32, ScalarKind::I8, ScalarKind::I32}, {16, 16, 32, ScalarKind::I8, ScalarKind::I32}};

// Per workgroup, in rows, tokens, invocations and uvec4 words of the one shared array: while
// multiplying, one stage (two with double_buffer) of staged weights (rows x kRowWords) then
// staged activations (tokens x kRowWords); then the int32 accumulators, token-major (c_stride
// words per token, padded by one word). Where all of them would need more shared memory than the
// stages and the target allow, they go through it in `passes`, each holding pass_tiles of every
// subgroup's token tiles (pass_tokens tokens).
struct Tiles {
  uint32_t rows, tokens, invocations;
  uint32_t a_words, b_words, stage_words, c_stride, shared_words;
  uint32_t passes, pass_tiles, pass_tokens;
};

Tiles tiles_of(const OpTarget& t, const MatrixShape& shape, const CoopMatmulOptions& o) {
  if (o.row_subgroups == 0 || o.token_subgroups == 0 || o.row_tiles == 0 || o.token_tiles == 0)
    throw std::invalid_argument("ternary_matmul_coopmat: subgroups and tiles per subgroup must be positive");
  Tiles r{};
  r.rows = o.row_subgroups * o.row_tiles * shape.m;
  r.tokens = o.token_subgroups * o.token_tiles * shape.n;
  r.invocations = o.row_subgroups * o.token_subgroups * t.subgroup_size;
  r.a_words = r.rows * kRowWords;
  r.b_words = r.tokens * kRowWords;
  r.stage_words = r.a_words + r.b_words;
  r.c_stride = r.rows / 4 + 1;
  const uint32_t stages = r.stage_words * (o.double_buffer ? 2 : 1);
  const uint32_t room = std::max<uint32_t>(stages, uint32_t(t.max_shared_bytes / 16));
  // The fewest passes (a divisor of token_tiles, so every pass is alike) whose words fit.
  r.passes = o.token_tiles;
  for (uint32_t p = 1; p <= o.token_tiles; ++p)
    if (o.token_tiles % p == 0 && r.tokens / p * r.c_stride <= room) {
      r.passes = p;
      break;
    }
  r.pass_tiles = o.token_tiles / r.passes;
  r.pass_tokens = r.tokens / r.passes;
  r.shared_words = std::max(stages, r.pass_tokens * r.c_stride);
  return r;
}

MatrixShape shape_or_throw(const OpTarget& t) {
  const auto shape = ternary_matmul_coopmat_shape(t);
  if (!shape)
    throw std::invalid_argument("ternary_matmul_coopmat: the target lists no cooperative-matrix shape 16x8x32 or "
                                "16x16x32 i8*i8+i32 (use ternary_matmul)");
  return *shape;
}

// Loads of one 128-column step, held in registers between the global read and the shared write,
// so the next step's reads are in flight while the tensor cores work on this one.
struct Staging {
  std::vector<Var<uvec4>> w, x;  // per invocation: its weight and activation items
};

// Weight item i: row i / 2 of the workgroup's, uvec4 i % 2 of its 32-byte block (bytes 16h..16h+15,
// each holding elements byte, 32 + byte, 64 + byte, 96 + byte at shifts 6, 4, 2, 0).
// Activation item i: token i / 8, uvec4 i % 8 of its 128 int8 of the block.
// With w_up (gate_up), the tile's first half of rows come from w and the second from w_up (a
// uniform branch per subgroup: a half is whole subgroups' items).
void fetch(KernelBuilder& k, Staging& st, const Buffer<uvec4>& w, const Buffer<uvec4>* w_up, const Buffer<uvec4>& x_q,
           Expr<u32> row0, Expr<u32> token0, Expr<u32> tokens, Expr<u32> blk, uint32_t rows, uint32_t cols, const Tiles& t) {
  for_invocation_items(k, t.rows * 2, t.invocations, [&](Expr<u32> i, uint32_t u) {
    if (!w_up) {
      auto row = min(row0 + (i >> 1u), rows - 1u);  // rows past the end read the last one, written nowhere
      st.w[u] = w[row * (cols / 64) + blk * 2u + (i & 1u)];
      return;
    }
    const uint32_t half = t.rows / 2;
    auto tile_row = let("tile_row", i >> 1u);
    if_(tile_row < half, [&] { st.w[u] = w[min(row0 + tile_row, rows - 1u) * (cols / 64) + blk * 2u + (i & 1u)]; }).else_([&] {
      st.w[u] = (*w_up)[min(row0 + (tile_row - half), rows - 1u) * (cols / 64) + blk * 2u + (i & 1u)];
    });
  });
  for_invocation_items(k, t.tokens * 8, t.invocations, [&](Expr<u32> i, uint32_t u) {
    auto token = min(token0 + (i >> 3u), tokens - 1u);  // likewise: a column of B feeds only its own token
    st.x[u] = x_q[token * (cols / 16) + blk * 8u + (i & 7u)];
  });
}

// Registers -> shared: weights as int8 rows of 128 (element 32j + 16h + 4m + byte sits in word m of
// uvec4 2j + h of the row, so one I2_S uvec4 gives four int8 uvec4), activations copied as they are.
void stash(KernelBuilder& k, const Staging& st, const Shared<uvec4>& tile, Expr<u32> stage, const Tiles& t) {
  for_invocation_items(k, t.rows * 2, t.invocations, [&](Expr<u32> i, uint32_t u) {
    auto at = let("a_at", stage + (i >> 1u) * kRowWords + (i & 1u));
    Expr<uvec4> v = st.w[u];
    for (uint32_t j = 0; j < 4; ++j) {
      const uint32_t shift = 6 - 2 * j;
      tile[at + 2 * j] = make_vec<u32>(ternary_bytes(v.x(), shift), ternary_bytes(v.y(), shift),
                                       ternary_bytes(v.z(), shift), ternary_bytes(v.w(), shift));
    }
  });
  for_invocation_items(k, t.tokens * 8, t.invocations, [&](Expr<u32> i, uint32_t u) {
    tile[stage + t.a_words + (i >> 3u) * kRowWords + (i & 7u)] = st.x[u];
  });
}

template <uint32_t M, uint32_t N, uint32_t K>
Kernel build(const OpTarget& target, uint32_t rows, uint32_t cols, const CoopMatmulOptions& o) {
  const Tiles tl = tiles_of(target, {M, N, K}, o);
  std::string name = "ternary_matmul_coopmat_" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                     "_" + std::to_string(tl.rows) + "x" + std::to_string(tl.tokens) + "_sg" +
                     std::to_string(o.row_subgroups) + "x" + std::to_string(o.token_subgroups) +
                     (o.double_buffer ? "_db" : "") + (o.k_splits > 1 ? "_k" + std::to_string(o.k_splits) : "") +
                     (o.add_residual ? "_residual" : "") + (o.write_accumulators ? "_acc" : "") +
                     (o.gate_up ? "_" + to_string(*o.gate_up) + "_gate_up" : "") + "_" +
                     std::to_string(rows) + "x" + std::to_string(cols);
  KernelBuilder k(name, {tl.invocations, 1, 1});
  auto w = k.buffer<uvec4>(o.gate_up ? "w_gate" : "w", Access::Read);
  std::optional<Buffer<uvec4>> w_up;
  if (o.gate_up) w_up = k.buffer<uvec4>("w_up", Access::Read);
  auto x_q = k.buffer<uvec4>("x_q", Access::Read);
  auto x_act = k.buffer<u32>("x_act", Access::Read);
  auto y = k.buffer<f32>("y", o.add_residual ? Access::ReadWrite : Access::Write);
  std::optional<Buffer<i32>> acc_out;
  if (o.write_accumulators) acc_out = k.buffer<i32>("acc", Access::Write);
  const bool split = o.k_splits > 1;
  std::optional<Buffer<i32>> totals;
  std::optional<Buffer<u32>> tickets;
  if (split) {
    totals = k.buffer<i32>("totals", Access::ReadWrite);
    tickets = k.buffer<u32>("tickets", Access::ReadWrite);
  }
  auto tokens = k.push<u32>("tokens");
  auto tile = k.shared<uvec4>("tile", tl.shared_words);

  // The workgroup's first output row: gate/up's tiles hold half their rows of each.
  const uint32_t out_rows = o.gate_up ? tl.rows / 2 : tl.rows;
  auto row0 = let("row0", k.workgroup_id().x() * out_rows);
  auto token0 = let("token0", k.workgroup_id().y() * tl.tokens);
  const uint32_t scale_at = uint32_t(uint64_t(rows) * cols / 64);
  auto scale = let("scale", bitcast<f32>(Expr<uvec4>(w[scale_at]).x()));
  std::optional<Expr<f32>> up_scale;
  if (w_up) up_scale = let("up_scale", bitcast<f32>(Expr<uvec4>((*w_up)[scale_at]).x()));
  // This subgroup's row_tiles x token_tiles accumulators of the workgroup's.
  auto a_at = let("a_base", (k.subgroup_id() % o.row_subgroups) * (o.row_tiles * M * kRowWords));
  auto b_at = let("b_base", (k.subgroup_id() / o.row_subgroups) * (o.token_tiles * N * kRowWords) + tl.a_words);

  std::vector<MatrixAcc<i32, M, N>> acc;
  for (uint32_t i = 0; i < o.row_tiles * o.token_tiles; ++i)
    acc.push_back(k.matrix<MatrixAcc<i32, M, N>>("acc" + std::to_string(i), 0));
  std::vector<MatrixA<i8, M, K>> a;
  std::vector<MatrixB<i8, K, N>> b;
  for (uint32_t i = 0; i < o.row_tiles; ++i) a.push_back(k.matrix<MatrixA<i8, M, K>>("a" + std::to_string(i)));
  for (uint32_t j = 0; j < o.token_tiles; ++j) b.push_back(k.matrix<MatrixB<i8, K, N>>("b" + std::to_string(j)));

  Staging st;
  for (uint32_t u = 0; u * tl.invocations < tl.rows * 2; ++u)
    st.w.push_back(k.var<uvec4>("w_stage" + std::to_string(u), make_vec<u32>(0u, 0u, 0u, 0u)));
  for (uint32_t u = 0; u * tl.invocations < tl.tokens * 8; ++u)
    st.x.push_back(k.var<uvec4>("x_stage" + std::to_string(u), make_vec<u32>(0u, 0u, 0u, 0u)));
  const uint32_t blocks = cols / kBlockCols;
  // This workgroup's blocks [first_block, end_block): all, or its split's share.
  const uint32_t per_split = ceil_div(blocks, o.k_splits);
  auto first_block = split ? let("first_block", k.workgroup_id().z() * per_split) : constant<u32>(0u);
  auto end_block = split ? let("end_block", min(first_block + per_split, blocks)) : constant<u32>(blocks);
  auto next_fetch = [&](Expr<u32> blk) {
    if_(blk < end_block, [&] { fetch(k, st, w, w_up ? &*w_up : nullptr, x_q, row0, token0, tokens, blk, rows, cols, tl); });
  };
  // This subgroup's products of the block staged at `stage`, K columns at a time.
  auto multiply = [&](Expr<u32> stage) {
    for (uint32_t kk = 0; kk < kBlockCols / 16; kk += K / 16) {
      for (uint32_t i = 0; i < o.row_tiles; ++i)
        a[i].load(tile, stage + a_at + (i * M * kRowWords + kk), kRowWords, MatrixLayout::RowMajor);
      for (uint32_t j = 0; j < o.token_tiles; ++j)
        b[j].load(tile, stage + b_at + (j * N * kRowWords + kk), kRowWords, MatrixLayout::ColumnMajor);
      for (uint32_t i = 0; i < o.row_tiles; ++i)
        for (uint32_t j = 0; j < o.token_tiles; ++j) acc[i * o.token_tiles + j].mul_add(a[i], b[j]);
    }
  };
  next_fetch(first_block);  // a split's share may be empty (more splits than its blocks fill)
  if (o.double_buffer) {
    // One barrier per block: block b + 1 is staged into the other half while block b is multiplied.
    stash(k, st, tile, constant<u32>(0u), tl);
    next_fetch(constant<u32>(1u));
    barrier();
    for_range(0u, blocks, [&](Expr<u32> blk) {
      auto stage = let("stage", (blk & 1u) * tl.stage_words);
      // The other stage: its last reads were before the previous barrier.
      if_(blk + 1u < blocks, [&] { stash(k, st, tile, tl.stage_words - stage, tl); });
      next_fetch(blk + 2u);
      multiply(stage);
      barrier();
    }, "blk");
  } else {
    for_range(first_block, end_block, [&](Expr<u32> blk) {
      barrier();  // the previous step's tensor-core loads are done with the tile
      stash(k, st, tile, constant<u32>(0u), tl);
      barrier();
      next_fetch(blk + 1u);
      multiply(constant<u32>(0u));
    }, "blk");
  }

  // Pass p puts token tiles [p * pass_tiles, (p + 1) * pass_tiles) of every subgroup in the tile:
  // word (slot * c_stride + row / 4), lane row % 4, where slot counts the pass's tokens, each token
  // subgroup's pass_tiles * N in a row.
  const uint32_t row_words = tl.rows / 4;
  const uint32_t sub_tokens = o.token_tiles * N;  // a token subgroup's tokens
  const uint32_t pass_sub_tokens = tl.pass_tiles * N;
  std::optional<Expr<u32>> c_at;  // this subgroup's first word
  auto stage_pass = [&](uint32_t pass) {
    barrier();  // the tile's previous readers are done with it
    if (!c_at)
      c_at = let("c_base", (k.subgroup_id() % o.row_subgroups) * (o.row_tiles * M / 4) +
                               (k.subgroup_id() / o.row_subgroups) * (pass_sub_tokens * tl.c_stride));
    for (uint32_t i = 0; i < o.row_tiles; ++i)
      for (uint32_t j = 0; j < tl.pass_tiles; ++j)
        acc[i * o.token_tiles + pass * tl.pass_tiles + j].store(tile, *c_at + (i * M / 4 + j * N * tl.c_stride),
                                                                 tl.c_stride, MatrixLayout::ColumnMajor);
    barrier();
  };
  // The workgroup's token of a pass's slot.
  auto local_token_of = [&](uint32_t pass, Expr<u32> slot) {
    return tl.passes == 1 ? slot
                          : let("local_token", (slot / pass_sub_tokens) * sub_tokens + (pass * pass_sub_tokens) +
                                                   slot % pass_sub_tokens);
  };
  // Each (token, row) of the pass's tokens that exists, with its accumulator in this workgroup.
  auto each_output = [&](uint32_t pass, const std::function<void(Expr<u32> at, Expr<u32> token, Expr<i32> dot)>& body) {
    for_range(k.local_index(), row_words * tl.pass_tokens, tl.invocations, [&](Expr<u32> i) {
      auto slot = let(tl.passes == 1 ? "local_token" : "slot", i / row_words);  // one pass: the slot is the token
      auto local_token = local_token_of(pass, slot);
      auto token = let("token", token0 + local_token);
      if_(token < tokens, [&] {
        auto words = let("c_words", Expr<uvec4>(tile[slot * tl.c_stride + i % row_words]));
        auto first = let("first_row", row0 + (i % row_words) * 4u);
        for (uint32_t l = 0; l < 4; ++l) {
          auto row = first + l;
          if_(row < rows, [&] { body(let("at", token * rows + row), token, bitcast<i32>(words.lane(l))); });
        }
      });
    }, "out");
  };
  auto each_pass = [&](const std::function<void(Expr<u32> at, Expr<u32> token, Expr<i32> dot)>& body) {
    for (uint32_t pass = 0; pass < tl.passes; ++pass) {
      stage_pass(pass);
      each_output(pass, body);
    }
  };
  auto epilogue = [&](Expr<u32> at, Expr<u32> token, Expr<i32> dot) {
    write_projection(y, acc_out, o.add_residual, at, dot, let("s", bitcast<f32>(Expr<u32>(x_act[token * 2u]))), scale);
  };
  if (o.gate_up) {
    // Word w of a slot holds gate rows 4w..4w+3 in the first half of the row words and the same
    // rows of up in the second.
    const uint32_t half_words = row_words / 2;
    for (uint32_t pass = 0; pass < tl.passes; ++pass) {
      stage_pass(pass);
      for_range(k.local_index(), half_words * tl.pass_tokens, tl.invocations, [&](Expr<u32> i) {
        auto slot = let("slot", i / half_words);
        auto token = let("token", token0 + local_token_of(pass, slot));
        if_(token < tokens, [&] {
          auto gate_words = let("gate_words", Expr<uvec4>(tile[slot * tl.c_stride + i % half_words]));
          auto up_words = let("up_words", Expr<uvec4>(tile[slot * tl.c_stride + i % half_words + half_words]));
          auto first = let("first_row", row0 + (i % half_words) * 4u);
          auto s = let("s", bitcast<f32>(Expr<u32>(x_act[token * 2u])));
          for (uint32_t l = 0; l < 4; ++l) {
            auto row = first + l;
            if_(row < rows, [&] {
              // Each as the plain epilogue's proj (acc / s * scale), then the product.
              auto gate = let("gate", cast<f32>(bitcast<i32>(gate_words.lane(l))) / s * scale);
              auto up = let("up", cast<f32>(bitcast<i32>(up_words.lane(l))) / s * *up_scale);
              y[token * rows + row] = gate_product(*o.gate_up, gate, up);
            });
          }
        });
      }, "out");
    }
    return k.build();
  }
  if (!split) {
    each_pass([&](Expr<u32> at, Expr<u32> token, Expr<i32> dot) { epilogue(at, token, let("dot", dot)); });
    return k.build();
  }
  // Splits: add this share to the totals, count it; the last share's workgroup finishes the tile.
  // Totals and tickets are touched by atomics alone, which act on the device's one copy, so
  // ops/common/handoff.h's barriers order them (a plain read of them here would not be).
  each_pass([&](Expr<u32> at, Expr<u32>, Expr<i32> dot) { atomic_add((*totals)[at], dot); });
  auto is_last = k.shared<u32>("is_last", 1);
  auto ticket_at = let("ticket_at", k.workgroup_id().y() * k.num_workgroups().x() + k.workgroup_id().x());
  count_arrival(k, target, (*tickets)[ticket_at], constant<u32>(o.k_splits), is_last);
  if_(Expr<u32>(is_last[0u]) == 1u, [&] {
    for (uint32_t pass = 0; pass < tl.passes; ++pass)
      each_output(pass, [&](Expr<u32> at, Expr<u32> token, Expr<i32>) {
        epilogue(at, token, let("dot", atomic_exchange((*totals)[at], 0)));  // the sum, and zero for the next dispatch
      });
    if_(k.local_index() == 0u, [&] { atomic_exchange((*tickets)[ticket_at], 0u); });
  });
  return k.build();
}

}  // namespace

CoopMatmulOptions coop_tiles_for(const OpTarget& target, uint32_t rows, uint32_t cols) {
  const Tuning& tu = tuning_for(target);
  const CoopTile& t = cols > tu.coop_short_tiles_past   ? tu.coop_tile_deep
                      : rows > tu.coop_short_tiles_past ? tu.coop_tile_tall
                                                        : tu.coop_tile_short;
  CoopMatmulOptions o;
  static_cast<CoopTile&>(o) = t;
  o.register_operands = t.register_operands && target.int8_fragments.has_value();  // else staged
  return o;
}

CoopMatmulOptions coop_tiles_for_step(const OpTarget& target, uint32_t tokens, uint32_t row_subgroups,
                                      uint32_t token_subgroups, int double_buffer) {
  const MatrixShape shape = shape_or_throw(target);
  const Tuning& tu = tuning_for(target);
  CoopMatmulOptions o;
  o.row_subgroups = std::max(1u, row_subgroups ? row_subgroups : tu.step_coop_row_subgroups);
  o.row_tiles = 1;
  const uint32_t token_tiles = ceil_div(std::max(tokens, 1u), shape.n);
  o.token_subgroups = std::clamp(token_subgroups ? token_subgroups : tu.step_coop_token_subgroups, 1u, token_tiles);
  o.token_tiles = ceil_div(token_tiles, o.token_subgroups);
  o.double_buffer = double_buffer < 0 ? tu.step_coop_double_buffer : double_buffer > 0;
  return o;
}

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
  if (options.register_operands) return ternary_matmul_fragments(target, rows, cols, options);
  const Tiles t = tiles_of(target, shape, options);
  if (options.gate_up && (options.add_residual || options.write_accumulators || options.k_splits > 1 || t.rows % 8 != 0))
    throw std::invalid_argument("ternary_matmul_coopmat: gate_up takes no residual, accumulators or k_splits, and a tile of "
                                "whole 4-row words of each (" + std::to_string(t.rows) + " rows)");
  if (options.k_splits == 0 || options.k_splits > cols / kBlockCols || (options.k_splits > 1 && options.double_buffer))
    throw std::invalid_argument("ternary_matmul_coopmat: k_splits " + std::to_string(options.k_splits) +
                                " must be 1 to the " + std::to_string(cols / kBlockCols) +
                                " blocks of 128 columns, and 1 with double_buffer");
  const uint64_t shared = uint64_t(t.shared_words) * 16;
  if (shared > target.max_shared_bytes || t.invocations > target.max_workgroup_invocations)
    throw std::invalid_argument("ternary_matmul_coopmat: " + std::to_string(t.rows) + " rows x " + std::to_string(t.tokens) +
                                " tokens per workgroup need " + std::to_string(shared) + " bytes of shared memory and " +
                                std::to_string(t.invocations) + " invocations: more than the target has");
  if (shape.n == 8) return build<16, 8, 32>(target, rows, cols, options);
  return build<16, 16, 32>(target, rows, cols, options);
}

uint32_t ternary_matmul_coopmat_row_groups(const OpTarget& target, uint32_t rows, const CoopMatmulOptions& options) {
  const uint32_t tile_rows = tiles_of(target, shape_or_throw(target), options).rows;
  return ceil_div(rows, options.gate_up ? tile_rows / 2 : tile_rows);
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
  CoopMatmulOptions c = options.step_tokens ? coop_tiles_for_step(target, options.step_tokens, options.step_row_subgroups,
                                                                 options.step_token_subgroups, options.step_double_buffer)
                                          : coop_tiles_for(target, rows, cols);
  if (options.step_tokens) {  // the split: asked for, else the table's for steps of few tokens
    const Tuning& tu = tuning_for(target);
    const uint32_t groups = ternary_matmul_coopmat_row_groups(target, rows, c) *
                            ternary_matmul_coopmat_token_groups(target, options.step_tokens, c);
    const bool few_groups = !tu.step_coop_split_max_workgroups || groups <= tu.step_coop_split_max_workgroups;
    const uint32_t per = options.step_blocks_per_split >= 0 ? uint32_t(options.step_blocks_per_split)
                         : options.step_tokens <= tu.step_coop_split_max_tokens && few_groups ? tu.step_coop_blocks_per_split
                                                                                              : 0u;
    if (per > 0 && !c.double_buffer) c.k_splits = std::max(1u, (cols / kBlockCols + per / 2) / per);
  }
  c.add_residual = options.projection.add_residual;
  c.write_accumulators = options.projection.write_accumulators;
  const Tiles t = tiles_of(target, shape_or_throw(target), c);
  return {ternary_matmul_coopmat(target, rows, cols, c), true, ternary_matmul_coopmat_row_groups(target, rows, c), t.tokens,
          c.k_splits};
}

Plan plan_ternary_matmul_coopmat(const OpTarget& target, uint32_t rows, uint32_t cols, const CoopMatmulOptions& options) {
  const uint32_t row_groups = ternary_matmul_coopmat_row_groups(target, rows, options);
  return {ternary_matmul_coopmat(target, rows, cols, options), [target, row_groups, options](uint32_t tokens) {
            return rt::Grid{row_groups, ternary_matmul_coopmat_token_groups(target, tokens, options), options.k_splits};
          }};
}

Plan plan_ternary_matmul_auto(const OpTarget& target, uint32_t rows, uint32_t cols, const MatmulOptions& options,
                              MatmulEngine engine) {
  PrefillMatmul m = ternary_matmul_auto(target, rows, cols, options, engine);
  const uint32_t row_groups = m.row_groups, per_group = m.tokens_per_group, splits = m.k_splits;
  return {std::move(m.kernel), [row_groups, per_group, splits](uint32_t tokens) {
            return rt::Grid{row_groups, (tokens + per_group - 1) / per_group, splits};
          }};
}

}  // namespace bdsl::ops
