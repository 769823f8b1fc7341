#include "golden/golden_compare.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace bdsl::golden {

TensorDiff compare_tensors(std::span<const float> expected, std::span<const float> actual) {
  if (expected.size() != actual.size()) {
    throw std::invalid_argument("compare_tensors: " + std::to_string(expected.size()) + " expected values, " +
                                std::to_string(actual.size()) + " actual");
  }
  TensorDiff d;
  double dot = 0, ee = 0, aa = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double e = expected[i], a = actual[i];
    if (!std::isfinite(e) || !std::isfinite(a)) d.nan_or_inf = true;
    const double err = std::fabs(a - e);
    if (err > d.max_abs_error) d.max_abs_error = err, d.worst_index = i;
    d.max_abs_expected = std::max(d.max_abs_expected, std::fabs(e));
    dot += e * a, ee += e * e, aa += a * a;
  }
  if (d.max_abs_expected > 0) d.max_rel_error = d.max_abs_error / d.max_abs_expected;
  else if (d.max_abs_error > 0) d.max_rel_error = INFINITY;
  if (ee > 0 || aa > 0) d.cosine = (ee > 0 && aa > 0) ? dot / std::sqrt(ee * aa) : 0.0;
  return d;
}

bool within_tolerance(const TensorDiff& diff, double tolerance) {
  return !diff.nan_or_inf && diff.max_rel_error <= tolerance;
}

}  // namespace bdsl::golden
