#include "ops/attention/rope_kv_write.h"

#include <algorithm>
#include <string>

#include "dsl/dsl.h"
#include "ops/common/half_rounding.h"
#include "ops/common/rope_rotation.h"
#include "ops/common/step_state.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

using rope::rotate;

uint32_t rope_kv_write_workgroup(const OpTarget& target) { return std::min(128u, target.max_workgroup_invocations); }

namespace {

dsl::Kernel build(const OpTarget& target, const AttentionDims& dims, uint32_t context, bool sequences) {
  dims.check("rope_kv_write");
  const uint32_t hd = dims.head_dim, half = hd / 2, quarter = hd / 4;
  KernelBuilder k(sequences ? "rope_neox_kv_write_f16_sequences" : "rope_neox_kv_write_f16", {rope_kv_write_workgroup(target), 1, 1});
  auto step = k.buffer<u32>(sequences ? "sequences" : "step", Access::Read);
  auto table = k.buffer<vec2>("rope_table", Access::Read);
  auto q = k.buffer<f32>("q", Access::ReadWrite);
  auto kk = k.buffer<f32>("k", Access::Read);
  auto v = k.buffer<f32>("v", Access::Read);
  auto k_cache = k.buffer<u32>("k_cache", Access::Write);
  auto v_cache = k.buffer<u32>("v_cache", Access::Write);
  auto n = k.push<u32>("n");

  // Invocation u handles pairs (2m, 2m + half) and (2m + 1, 2m + 1 + half) of head u / quarter,
  // m = u % quarter, over the heads q_0.., then k_0.., then v_0.. (copied, not turned).
  auto u = k.global_id().x();
  auto t = k.workgroup_id().y();
  auto head = let("head", u / quarter);
  auto i0 = let("i0", (u % quarter) * 2u);
  auto pos = let("pos", sequences ? Expr<u32>(step[t * kSequenceWords + kSequencePos]) : step[kStepPos] + t);
  // The cache row of the token's position: its sequence's first row + pos.
  auto row = sequences ? let("row", step[t * kSequenceWords + kSequenceFirstRow] + pos) : pos;
  if_(t < n && head < dims.n_heads + 2 * dims.n_kv_heads, [&] {
    auto rotation = [&](Expr<u32> i) { return rope::table_rotation(table, pos, i, context, hd); };
    if_(head < dims.n_heads, [&] {
      auto at = let("at", t * dims.q_width() + head * hd + i0);
      for (uint32_t j = 0; j < 2; ++j) {
        auto turned = let("turned" + std::to_string(j), rotate(q[at + j], q[at + j + half], rotation(i0 + j)));
        q[at + j] = round_to_half(turned.x());  // F16 precision: what bitnet.cpp multiplies with the keys
        q[at + j + half] = round_to_half(turned.y());
      }
    }).else_([&] {
      auto kv = let("kv", (head - dims.n_heads) % dims.n_kv_heads);
      auto at = let("kv_at", t * dims.kv_width() + kv * hd + i0);
      auto word = let("word", (row * dims.kv_width() + kv * hd + i0) / 2u);
      if_(pos < context, [&] {
        if_(head < dims.n_heads + dims.n_kv_heads, [&] {
          auto a = let("a", rotate(kk[at], kk[at + half], rotation(i0)));
          auto b = let("b", rotate(kk[at + 1u], kk[at + 1u + half], rotation(i0 + 1u)));
          k_cache[word] = pack_half2x16(make_vec<f32>(a.x(), b.x()));
          k_cache[word + half / 2] = pack_half2x16(make_vec<f32>(a.y(), b.y()));
        }).else_([&] {
          v_cache[word] = pack_half2x16(make_vec<f32>(v[at], v[at + 1u]));
          v_cache[word + half / 2] = pack_half2x16(make_vec<f32>(v[at + half], v[at + 1u + half]));
        });
      });
    });
  });
  return k.build();
}

}  // namespace

dsl::Kernel rope_kv_write(const OpTarget& target, const AttentionDims& dims, uint32_t context) {
  return build(target, dims, context, false);
}

dsl::Kernel rope_kv_write_sequences(const OpTarget& target, const AttentionDims& dims, uint32_t context) {
  return build(target, dims, context, true);
}

namespace {
GridRule rope_kv_grid(const OpTarget& target, const AttentionDims& dims) {
  const uint32_t wg = rope_kv_write_workgroup(target);
  const uint32_t groups = ((dims.n_heads + 2 * dims.n_kv_heads) * dims.head_dim / 4 + wg - 1) / wg;
  return [groups](uint32_t tokens) { return rt::Grid{groups, tokens}; };
}
}  // namespace

Plan plan_rope_kv_write(const OpTarget& target, const AttentionDims& dims, uint32_t context) {
  return {rope_kv_write(target, dims, context), rope_kv_grid(target, dims)};
}

Plan plan_rope_kv_write_sequences(const OpTarget& target, const AttentionDims& dims, uint32_t context) {
  return {rope_kv_write_sequences(target, dims, context), rope_kv_grid(target, dims)};
}

}  // namespace bdsl::ops
