// An op as a caller records it: its kernel and the grid that kernel needs, built together from
// one set of options so that they cannot disagree. The grid is a rule of the count a dispatch
// gives (tokens, rows or sequences, as the op's header says); an op of one fixed shape ignores it.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>

#include "codegen/shader_cache.h"
#include "dsl/dsl.h"
#include "runtime/context.h"
#include "runtime/graph.h"
#include "runtime/pipeline.h"

namespace bdsl::ops {

using GridRule = std::function<rt::Grid(uint32_t count)>;

// A rule for a grid that does not depend on the count.
GridRule fixed_grid(rt::Grid grid);

struct Plan {
  dsl::Kernel kernel;
  GridRule grid_for;
  rt::Grid grid(uint32_t count = 1) const { return grid_for(count); }
};

// A plan's kernel built into a pipeline, kept with its grid.
struct PlannedPipeline {
  rt::Pipeline pipeline;
  GridRule grid_for;
  rt::Grid grid(uint32_t count = 1) const { return grid_for(count); }
  const std::string& name() const { return pipeline.name(); }

  // Records the pipeline into g with its grid for `count`.
  void dispatch(rt::Graph& g, std::span<const rt::Arg> args, const rt::PushConstants& push = {}, uint32_t count = 1) const {
    g.dispatch(pipeline, args, push, grid(count));
  }
  void dispatch(rt::Graph& g, std::initializer_list<rt::Arg> args, const rt::PushConstants& push = {}, uint32_t count = 1) const {
    dispatch(g, std::span<const rt::Arg>(args.begin(), args.size()), push, count);
  }
};

PlannedPipeline make_pipeline(rt::Context& ctx, const Plan& plan, codegen::ShaderCache& cache = codegen::default_shader_cache());

}  // namespace bdsl::ops
