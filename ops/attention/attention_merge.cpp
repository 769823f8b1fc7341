#include "ops/attention/attention_merge.h"

namespace bdsl::ops::detail {
using namespace bdsl::dsl;

// Every product and sum is `precise` (no fma contraction): the kernels that merge the same
// partials (attention's own combine, a consumer's prologue) are different shaders, and a
// compiler free to fuse a * b + c would fuse them differently in each, an ulp apart.
MergeState merge_round(const MergeState& s, const std::vector<Expr<boolean>>& valid, const std::vector<Expr<vec2>>& stats,
                       const std::vector<std::vector<Expr<vec2>>>& parts) {
  Expr<f32> best = s.max;
  for (size_t u = 0; u < stats.size(); ++u) best = max(best, select(valid[u], stats[u].x(), constant<f32>(kAttentionLowest)));
  auto m_new = let("m_new", best);
  auto alpha = let_precise("alpha", exp(s.max - m_new));
  Expr<f32> t = let_precise("merge_total", s.total * alpha);
  std::vector<Expr<vec2>> acc;
  for (const auto& p : s.pairs) acc.push_back(let_precise("merge_pair", p * alpha));
  for (size_t u = 0; u < stats.size(); ++u) {
    auto wgt = let_precise("wgt", select(valid[u], exp(stats[u].x() - m_new) * stats[u].y(), constant<f32>(0.0f)));
    t = let_precise("merge_total", t + wgt);
    for (size_t p = 0; p < acc.size(); ++p) acc[p] = let_precise("merge_pair", acc[p] + parts[p][u] * wgt);
  }
  return {m_new, t, acc};
}

}  // namespace bdsl::ops::detail
