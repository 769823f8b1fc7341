// What codegen hands the runtime: a kernel's interface (dsl/interface.h) with its GLSL, cache key
// and SPIR-V.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dsl/interface.h"

namespace bdsl {

// The result of codegen: everything the runtime needs to build a pipeline.
struct CompiledKernel {
  KernelInterface iface;
  std::string glsl;              // the printed source, for humans and for the cache key
  std::string key;               // hex SHA-256 of everything that changes the binary
  std::vector<uint32_t> spirv;
  // Specialization constants (constant_id -> 32-bit value) the pipeline is built with.
  std::vector<std::pair<uint32_t, uint32_t>> spec_constants;
};

}  // namespace bdsl
