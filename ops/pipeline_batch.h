// Pipelines made together: each plan's GLSL is printed, compiled by glslang and spirv-opt (on a
// shader cache miss) and handed to the driver (which compiles it again on a VkPipelineCache miss)
// on a pool of threads, since the kernels are independent; on a fresh machine that is most of a
// model's start-up. add() each plan with where its pipeline goes, then build() once.
#pragma once
#include <optional>
#include <vector>

#include "ops/plan.h"

namespace bdsl::ops {

class PipelineBatch {
 public:
  void add(Plan plan, PlannedPipeline& into);
  void add(Plan plan, std::optional<PlannedPipeline>& into);  // emplaced by build()
  // Builds every pipeline added (on up to `threads` threads; 0: the machine's cores, at most 8)
  // and puts each where it goes. Rethrows the first failure, naming its kernel, once all are done.
  void build(rt::Context& ctx, codegen::ShaderCache& cache, unsigned threads = 0);

 private:
  struct Entry {
    Plan plan;
    PlannedPipeline* into = nullptr;
    std::optional<PlannedPipeline>* optional_into = nullptr;
  };
  std::vector<Entry> entries_;
};

}  // namespace bdsl::ops
