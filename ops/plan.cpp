#include "ops/plan.h"

#include "runtime/kernel_pipeline.h"

namespace bdsl::ops {

GridRule fixed_grid(rt::Grid grid) {
  return [grid](uint32_t) { return grid; };
}

PlannedPipeline make_pipeline(rt::Context& ctx, const Plan& plan, codegen::ShaderCache& cache) {
  return {rt::make_pipeline(ctx, plan.kernel, cache), plan.grid_for};
}

}  // namespace bdsl::ops
