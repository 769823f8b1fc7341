// Prints a kernel's IR as GLSL 4.60 for Vulkan: deterministic (same kernel, same text), indented,
// one statement per line, values used twice named once (see materialize.h).
#pragma once
#include <string>

#include "codegen/kernel_interface.h"
#include "dsl/builder.h"

namespace bdsl::codegen {

std::string print_glsl(const dsl::Kernel& kernel);

}  // namespace bdsl::codegen
