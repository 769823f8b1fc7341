// An op as a caller records it: its kernel and the grid that kernel needs, built together from
// one set of options so that they cannot disagree.
#pragma once
#include "dsl/dsl.h"
#include "runtime/graph.h"

namespace bdsl::ops {

struct Plan {
  dsl::Kernel kernel;
  rt::Grid grid;
};

}  // namespace bdsl::ops
