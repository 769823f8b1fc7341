#include "ops/attention/attention_merge.h"

namespace bdsl::ops::detail {
using namespace bdsl::dsl;

MergeState merge_round(const MergeState& s, const std::vector<Expr<boolean>>& valid, const std::vector<Expr<vec2>>& stats,
                       const std::vector<std::vector<Expr<vec2>>>& parts) {
  Expr<f32> best = s.max;
  for (size_t u = 0; u < stats.size(); ++u) best = max(best, select(valid[u], stats[u].x(), constant<f32>(kAttentionLowest)));
  auto m_new = let("m_new", best);
  auto alpha = let("alpha", exp(s.max - m_new));
  Expr<f32> t = s.total * alpha;
  std::vector<Expr<vec2>> acc;
  for (const auto& p : s.pairs) acc.push_back(p * alpha);
  for (size_t u = 0; u < stats.size(); ++u) {
    auto wgt = let("wgt", select(valid[u], exp(stats[u].x() - m_new) * stats[u].y(), constant<f32>(0.0f)));
    t = t + wgt;
    for (size_t p = 0; p < acc.size(); ++p) acc[p] = acc[p] + parts[p][u] * wgt;
  }
  return {m_new, t, acc};
}

}  // namespace bdsl::ops::detail
