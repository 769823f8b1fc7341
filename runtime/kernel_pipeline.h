// The short path from a DSL kernel to a runnable pipeline on a context's device: validate against
// the device's limits, print, compile through the shader cache, build the pipeline.
#pragma once
#include "codegen/compile.h"
#include "dsl/builder.h"
#include "runtime/context.h"
#include "runtime/pipeline.h"

namespace bdsl::rt {

codegen::TargetLimits target_limits(const DeviceInfo& device);

Pipeline make_pipeline(Context& ctx, const dsl::Kernel& kernel,
                       codegen::ShaderCache& cache = codegen::default_shader_cache(),
                       const codegen::CompileOptions& options = {});

}  // namespace bdsl::rt
