#include "ops/experimental/persistent_chain.h"

#include <fmt/format.h>

#include "ops/experimental/phase_sync.h"
#include "ops/ternary/ternary_projection.h"

namespace bdsl::ops {
using namespace dsl;

Kernel persistent_chain_kernel(const OpTarget& target, const MatvecOptions& o, uint32_t dim, uint32_t phases,
                               uint32_t groups, bool memory_model) {
  KernelBuilder k(fmt::format("persistent_projection_chain_{}x{}_p{}{}", dim, dim, phases, memory_model ? "_mm" : ""),
                  {ternary_matvec_workgroup(target, o), 1, 1});
  auto step = k.buffer<u32>("step", Access::Read);
  auto counters = k.volatile_buffer<u32>("counters", Access::ReadWrite);
  auto eps = k.push<f32>("eps");
  auto base = k.push<u32>("phase_base");
  const PhaseSync sync(k, step, counters, 1u << 16, memory_model);
  auto id = k.workgroup_id().x();
  for (uint32_t p = 0; p < phases; ++p) {
    detail::ProjectionSite site{&k, id};
    site.eps = eps;
    site.step = step;
    site.sharing = memory_model ? detail::Sharing::Handoff : detail::Sharing::Coherent;
    if (p > 0) site.before_activations = [&, p] { sync.wait(base + kPhaseCounterStride * (p - 1), groups); };
    detail::emit_ternary_projection(site, target, "chain", {{"w", dim}}, dim, detail::kSeparate, o);
    if (p + 1 < phases) sync.signal(base + kPhaseCounterStride * p);
  }
  return k.build();
}

}  // namespace bdsl::ops
