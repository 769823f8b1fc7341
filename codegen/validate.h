// Structural checks on a kernel before any GLSL is compiled: what the C++ type system cannot see.
// Each failure throws DslError naming the kernel and the problem.
#pragma once
#include <array>
#include <cstdint>

#include "dsl/builder.h"

namespace bdsl::codegen {

// The device limits a kernel must fit. Defaults are Vulkan's guaranteed minimums.
struct TargetLimits {
  uint32_t max_shared_bytes = 16384;
  uint32_t max_invocations = 128;
  std::array<uint32_t, 3> max_size{128, 128, 64};
  uint32_t max_push_bytes = 128;
};

// Checks: workgroup size and shared memory within the limits; no writes (or atomics) to a
// read-only buffer and no reads of a write-only one; every barrier reached in uniform control flow.
void validate(const dsl::Kernel& kernel, const TargetLimits& limits = {});

}  // namespace bdsl::codegen
