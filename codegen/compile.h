// From a DSL kernel to SPIR-V: validate, print, then compile through the SHA-256 keyed cache.
#pragma once
#include "codegen/kernel_interface.h"
#include "codegen/shader_cache.h"
#include "codegen/validate.h"
#include "dsl/builder.h"

namespace bdsl::codegen {

const CompiledKernel& compile(const dsl::Kernel& kernel, const TargetLimits& limits = {},
                              const CompileOptions& options = {},
                              ShaderCache& cache = default_shader_cache());

}  // namespace bdsl::codegen
