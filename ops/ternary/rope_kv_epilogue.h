// The RoPE + KV-cache epilogue of the QKV projection (decode: ternary_matvec_qkv_rope and the
// fused decode layer's QKV phase; a batch of sequences: ternary_matmul_qkv_rope): which head a
// subgroup's quad of rows belongs to, its rotations and its stores, for one token or each token
// of a tile. Internal to ops/ternary/ternary_projection.cpp.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dsl/dsl.h"
#include "ops/common/half_rounding.h"
#include "ops/common/rope_rotation.h"
#include "ops/common/step_state.h"
#include "ops/ternary/ternary_projection.h"

namespace bdsl::ops::detail {
using namespace bdsl::dsl;

// The head of RoPE quad row / 4 among q's, k's and v's heads (in that order) and, for each kind
// of head, `use(t, local_head)` in its branch (t: 0 q, 1 k, 2 v; local_head: the head within its
// tensor).
template <class Use>
void rope_head_branches(const RopeKvEpilogue& r, Expr<u32> head, const std::string& tag, Use&& use) {
  const AttentionDims& d = r.dims;
  auto kv_branches = [&] {
    auto kv = let(tag + "kv", (head - d.n_heads) % d.n_kv_heads);
    if_(head < d.n_heads + d.n_kv_heads, [&] { use(1, kv); }).else_([&] { use(2, kv); });
  };
  if_(head < d.n_heads, [&] { use(0, head); }).else_(kv_branches);
}

// Quad row / 4's head: p / (hd / 4), counted from q's first head.
inline Expr<u32> rope_quad_head(const RopeKvEpilogue& r, Expr<u32> row, const std::string& tag) {
  auto head = (row / 4u) / (r.dims.head_dim / 4);
  return let(tag + "head", head);
}

// The tensor (0 q, 1 k, 2 v) and the four rows of RoPE quad row / 4 (see emit_rope_kv_quad),
// for the prefetch: `use(t, rows)` runs in the branch of that tensor.
template <class Use>
void rope_quad_rows(const RopeKvEpilogue& r, Expr<u32> row, Use&& use) {
  const uint32_t hd = r.dims.head_dim, half = hd / 2, quarter = hd / 4;
  auto m2 = ((row / 4u) % quarter) * 2u;
  rope_head_branches(r, rope_quad_head(r, row, "pre_"), "pre_", [&](size_t t, Expr<u32> local_head) {
    auto at = let("pre_row", local_head * hd + m2);
    use(t, std::vector<Expr<u32>>{at, at + 1u, at + half, at + (1 + half)});
  });
}

// The cos/sin pairs of quad row / 4's two RoPE pairs, (m2, m2 + 1), at `pos`.
inline std::pair<Expr<vec2>, Expr<vec2>> rope_quad_rotations_at(const RopeKvEpilogue& r, Expr<u32> row, Expr<u32> pos,
                                                                 const Buffer<vec2>& table) {
  const uint32_t hd = r.dims.head_dim;
  auto m2 = let("rot_pair0", ((row / 4u) % (hd / 4)) * 2u);
  return {let("rot0", rope::table_rotation(table, pos, m2, r.context, hd)),
          let("rot1", rope::table_rotation(table, pos, m2 + 1u, r.context, hd))};
}

// The same at the decode step's position.
inline std::pair<Expr<vec2>, Expr<vec2>> rope_quad_rotations(const RopeKvEpilogue& r, Expr<u32> row,
                                                      const Buffer<u32>& step, const Buffer<vec2>& table) {
  return rope_quad_rotations_at(r, row, let("rot_pos", step[kStepPos]), table);
}

// Where one token of a quad's epilogue goes: its position (rotations), the cache row that position
// is written to, where its q vector starts, and whether the token exists (a batch's tile may run
// past the batch). The decode step's single token: pos = the step's, cache row = pos, q at 0.
struct RopeToken {
  Expr<u32> pos, cache_row;
  std::optional<Expr<u32>> q_base;
  std::optional<Expr<boolean>> valid;
  std::pair<Expr<vec2>, Expr<vec2>> rotations;  // rope_quad_rotations at pos
};

// One subgroup's quad of QKV rows with the RoPE epilogue: quad p = row / 4 of head p / (hd / 4)
// (heads: q, then k, then v), pair index m2 = 2 * (p % (hd / 4)), rows m2, m2 + 1, m2 + half,
// m2 + 1 + half of that head. `project(t, rows)` gives the four values of every token ([token][4]);
// lane 0 turns them as rope_kv_write does (same expressions, so the same bits) and stores q (f32,
// rounded to F16 precision) or the cache words (F16) at each token's position.
template <class Project>
void emit_rope_kv_quad_tokens(const RopeKvEpilogue& r, Expr<u32> row, Project&& project, const std::vector<RopeToken>& tokens,
                              const std::optional<Buffer<f32>>& y_q, const std::optional<Buffer<u32>>& k_cache,
                              const std::optional<Buffer<u32>>& v_cache, Expr<boolean> lane0) {
  const AttentionDims& d = r.dims;
  const uint32_t hd = d.head_dim, half = hd / 2, quarter = hd / 4;
  auto m2 = let("pair0", ((row / 4u) % quarter) * 2u);
  auto turned = [&](const std::vector<Expr<f32>>& v, const RopeToken& tok) {
    auto a = let("turned0", rope::rotate(v[0], v[2], tok.rotations.first));
    auto b = let("turned1", rope::rotate(v[1], v[3], tok.rotations.second));
    return std::pair{a, b};
  };
  rope_head_branches(r, rope_quad_head(r, row, ""), "", [&](size_t t, Expr<u32> local_head) {
    auto at = let("head_row", local_head * hd + m2);
    const std::vector<Expr<u32>> rows{at, at + 1u, at + half, at + (1 + half)};
    const std::vector<std::vector<Expr<f32>>> values = project(t, rows);
    for (size_t n = 0; n < tokens.size(); ++n) {
      const RopeToken& tok = tokens[n];
      const std::vector<Expr<f32>>& v = values[n];
      if (t == 0) {
        if_(tok.valid ? lane0 && *tok.valid : lane0, [&] {
          auto [a, b] = turned(v, tok);
          // q rounded to F16 as it is stored (as rope_kv_write does): what bitnet.cpp multiplies with the keys.
          auto q_at = tok.q_base ? let("q_at", *tok.q_base + at) : at;
          auto store = [&](Expr<u32> i, Expr<f32> value) { (*y_q)[i] = round_to_half(value); };
          store(q_at, a.x());
          store(q_at + half, a.y());
          store(q_at + 1u, b.x());
          store(q_at + (1 + half), b.y());
        });
        continue;
      }
      auto word = let("word", (tok.cache_row * d.kv_width() + at) / 2u);
      auto writes = tok.valid ? lane0 && *tok.valid && tok.pos < r.context : lane0 && tok.pos < r.context;
      if_(writes, [&] {
        if (t == 1) {
          auto [a, b] = turned(v, tok);
          (*k_cache)[word] = pack_half2x16(make_vec<f32>(a.x(), b.x()));
          (*k_cache)[word + half / 2] = pack_half2x16(make_vec<f32>(a.y(), b.y()));
        } else {
          (*v_cache)[word] = pack_half2x16(make_vec<f32>(v[0], v[1]));
          (*v_cache)[word + half / 2] = pack_half2x16(make_vec<f32>(v[2], v[3]));
        }
      });
    }
  });
}

// The decode step's quad: one token at the step's position (`rotations` loaded earlier, or here).
template <class Project>
void emit_rope_kv_quad(const RopeKvEpilogue& r, Expr<u32> row, Project&& project,
                       const Buffer<u32>& step, const Buffer<vec2>& table, const std::optional<Buffer<f32>>& y_q,
                       const std::optional<Buffer<u32>>& k_cache, const std::optional<Buffer<u32>>& v_cache, Expr<boolean> lane0,
                       std::optional<std::pair<Expr<vec2>, Expr<vec2>>> rotations = std::nullopt) {
  auto pos = let("pos", step[kStepPos]);
  // Loaded before the dot products (for the first row group, before the norm prologue): the two
  // dependent loads (position, then table) overlap the weight loads instead of following them.
  if (!rotations) rotations = rope_quad_rotations(r, row, step, table);
  emit_rope_kv_quad_tokens(r, row, [&](size_t t, const std::vector<Expr<u32>>& rows) {
    return std::vector<std::vector<Expr<f32>>>{project(t, rows)};
  }, {RopeToken{pos, pos, std::nullopt, std::nullopt, *rotations}}, y_q, k_cache, v_cache, lane0);
}

}  // namespace bdsl::ops::detail
