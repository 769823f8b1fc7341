// Row-wise softmax with one subgroup per row: max and sum come from subgroup reductions, no
// shared memory and no barrier. Works for any subgroup size the device picks.
#pragma once
#include <cstdint>

#include "dsl/builder.h"

namespace bdsl::ops {

// Bindings: x (read, rows x cols), y (write). Push: rows (u32), cols (u32).
// Grid: ceil(rows / subgroups_per_workgroup) workgroups of `workgroup` invocations.
dsl::Kernel subgroup_softmax(uint32_t workgroup);

}  // namespace bdsl::ops
