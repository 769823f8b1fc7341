// How far a computed tensor is from its golden value: the numbers a per-layer check prints and
// decides on (the reproduction test here, and `bitnet-dsl validate` for the GPU).
#pragma once
#include <cstddef>
#include <span>

namespace bdsl::golden {

struct TensorDiff {
  double max_abs_error = 0;     // max |actual - expected|
  double max_abs_expected = 0;  // max |expected|: the tensor's scale
  double max_rel_error = 0;     // max_abs_error / max_abs_expected (0 when both are 0)
  double cosine = 1;            // cosine similarity (1 when both are all zero)
  std::size_t worst_index = 0;  // where max_abs_error occurs
  bool nan_or_inf = false;      // a non-finite value on either side
};

// Throws std::invalid_argument when the sizes differ.
TensorDiff compare_tensors(std::span<const float> expected, std::span<const float> actual);

// Finite and max_rel_error <= tolerance (relative to the tensor's largest magnitude, so values
// near zero in a tensor of large ones are not held to an impossible relative standard).
bool within_tolerance(const TensorDiff& diff, double tolerance);

}  // namespace bdsl::golden
