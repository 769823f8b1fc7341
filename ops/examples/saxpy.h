// y = a * x + y over n floats: the tutorial's first kernel (docs/writing-kernels.md).
#pragma once
#include "dsl/builder.h"

namespace bdsl::ops {

// Bindings: x (read), y (read-write). Push: n (u32), a (f32). Grid: ceil(n / 256) workgroups.
dsl::Kernel saxpy();

}  // namespace bdsl::ops
