#include "runtime/kernel_pipeline.h"

namespace bdsl::rt {

codegen::TargetLimits target_limits(const DeviceInfo& device) {
  codegen::TargetLimits limits;
  limits.max_shared_bytes = device.max_shared_memory;
  limits.max_invocations = device.max_workgroup_invocations;
  limits.max_size = device.max_workgroup_size;
  limits.max_push_bytes = device.max_push_constants;
  return limits;
}

Pipeline make_pipeline(Context& ctx, const dsl::Kernel& kernel, codegen::ShaderCache& cache,
                       const codegen::CompileOptions& options) {
  return Pipeline(ctx, codegen::compile(kernel, target_limits(ctx.info()), options, cache));
}

}  // namespace bdsl::rt
