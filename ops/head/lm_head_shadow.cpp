#include "ops/head/lm_head_shadow.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/matrix_support.h"
#include "ops/head/lm_head.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {
constexpr uint32_t kMaxWorkgroups = 8192;  // each takes every groups-th row
}

uint32_t lm_head_shadow_workgroups(const OpTarget&, uint32_t vocab) { return std::min(vocab, kMaxWorkgroups); }

Kernel lm_head_shadow(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
  if (dim == 0 || dim % 4 != 0) throw std::invalid_argument("lm_head_shadow: dim " + std::to_string(dim) + " is not a multiple of 4");
  const LmHeadSplit split = lm_head_split(target, vocab, dim, rows_per_part);
  const uint32_t wg = subgroup_multiple_workgroup(target, 128);
  const uint32_t groups = lm_head_shadow_workgroups(target, vocab);
  KernelBuilder k("lm_head_shadow_" + std::to_string(vocab) + "x" + std::to_string(dim) + "_parts" + std::to_string(split.parts),
                  {wg, 1, 1});
  std::vector<Buffer<u32>> table, shadow;
  for (uint32_t p = 0; p < split.parts; ++p) table.push_back(k.buffer<u32>("table" + std::to_string(p), Access::Read));
  for (uint32_t p = 0; p < split.parts; ++p) shadow.push_back(k.buffer<u32>("shadow" + std::to_string(p), Access::Write));
  auto scale = k.buffer<f32>("scale", Access::Write);
  auto bound = k.buffer<f32>("bound", Access::Write);
  auto amax_parts = k.shared<f32>("amax_parts", wg);
  auto sum_parts = k.shared<vec4>("sum_parts", wg);
  const uint32_t words = dim / 4;  // int8 words of a row; two F16 words each
  const float gamma = float(2.0 * dim * std::ldexp(1.0, -24) + std::ldexp(1.0, -22));
  auto lid = k.local_index();
  for (uint32_t p = 0; p < split.parts; ++p) {
    const uint32_t rows = split.rows_in_part(p, vocab);
    for_range(k.workgroup_id().x(), rows, groups, [&](Expr<u32> r) {
      auto f16_base = let("f16_base", r * (dim / 2));
      auto values = [&](Expr<u32> w) {  // the 4 values of int8 word w
        auto lo = let("lo", unpack_half2x16(Expr<u32>(table[p][f16_base + 2u * w])));
        auto hi = let("hi", unpack_half2x16(Expr<u32>(table[p][f16_base + 2u * w + 1u])));
        return std::array<Expr<f32>, 4>{lo.x(), lo.y(), hi.x(), hi.y()};
      };
      auto own_max = k.var<f32>("own_max", 0.0f);
      for_range(lid, words, wg, [&](Expr<u32> w) {
        for (const auto& v : values(w)) own_max = max(Expr<f32>(own_max), abs(v));
      }, "w");
      auto amax = workgroup_max<f32>(k, amax_parts, own_max, "amax");
      auto s = let_precise("s", amax / 127.0f);
      auto sums = k.var<vec4>("sums", make_vec<f32>(0.0f, 0.0f, 0.0f, 0.0f));  // err2, q2, w2, -
      for_range(lid, words, wg, [&](Expr<u32> w) {
        std::vector<Expr<i32>> q;
        const auto v = values(w);
        for (uint32_t j = 0; j < 4; ++j) {
          // Half steps away from zero, as the host twin's lround.
          auto ratio = let_precise("ratio", v[j] / s);
          auto rounded = let("rounded", select(ratio < 0.0f, -floor(0.5f - ratio), floor(ratio + 0.5f)));
          q.push_back(let("q", select(s > 0.0f, cast<i32>(clamp(rounded, -127.0f, 127.0f)), constant<i32>(0))));
          auto e = let_precise("e", v[j] - s * cast<f32>(q[j]));
          auto qf = let("qf", cast<f32>(q[j]));
          sums = let_precise("grown", Expr<vec4>(sums) + make_vec<f32>(e * e, qf * qf, v[j] * v[j], 0.0f));
        }
        shadow[p][r * words + w] = pack_i8x4(make_vec<i32>(q[0], q[1], q[2], q[3]));
      }, "w");
      auto total = workgroup_add<vec4>(k, sum_parts, sums, "total");
      if_(lid == 0u, [&] {
        auto e_norm = let_precise("e_norm", sqrt(total.x()) * 1.002f);
        auto sq_norm = let_precise("sq_norm", s * (sqrt(total.y()) * 1.002f));
        auto w_norm = let_precise("w_norm", sqrt(total.z()) * 1.002f);
        auto row = let("row", r + p * split.rows_per_part);
        scale[row] = s;
        bound[2u * row] = let_precise("c", (e_norm + gamma * (sq_norm + w_norm)) * 1.001f);
        bound[2u * row + 1u] = let_precise("d", sq_norm * 1.001f);
      });
      barrier();  // the reductions' scratch is used again by the next row
    }, "r");
  }
  return k.build();
}

Plan plan_lm_head_shadow(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part) {
  return {lm_head_shadow(target, vocab, dim, rows_per_part), fixed_grid({lm_head_shadow_workgroups(target, vocab)})};
}

}  // namespace bdsl::ops
