// Partial sums of n floats, one per workgroup, through shared memory and barriers: the tutorial's
// reduction example. Run it again on its own output until one value is left.
#pragma once
#include <cstdint>

#include "dsl/builder.h"

namespace bdsl::ops {

// Bindings: x (read), sums (write, one float per workgroup). Push: n (u32).
// `workgroup` must be a power of two the device allows.
dsl::Kernel workgroup_sum(uint32_t workgroup);

}  // namespace bdsl::ops
