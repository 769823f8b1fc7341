// Everything a kernel author needs: #include "dsl/dsl.h" and `using namespace bdsl::dsl;`.
#pragma once
#include "dsl/builtins.h"
#include "dsl/control.h"
#include "dsl/expr.h"
#include "dsl/kernel_builder.h"
#include "dsl/matrix.h"
#include "dsl/memory.h"
#include "dsl/scalar_types.h"

namespace bdsl::dsl {
using bdsl::Access;
}
