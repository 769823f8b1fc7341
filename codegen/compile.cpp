#include "codegen/compile.h"

#include "codegen/glsl_printer.h"
#include "codegen/interface_of.h"

namespace bdsl::codegen {

const CompiledKernel& compile(const dsl::Kernel& kernel, const TargetLimits& limits,
                              const CompileOptions& options, ShaderCache& cache) {
  validate(kernel, limits);
  return cache.get(interface_of(kernel), print_glsl(kernel), options);
}

}  // namespace bdsl::codegen
