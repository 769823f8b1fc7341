// `phases` dim x dim projections (attn_output's kind: the sub-norm fused, no residual) one after
// another inside one dispatch, every workgroup taking part in every phase and waiting for all
// `groups` of them between phases (ops/experimental/phase_sync.h). A probe of what a persistent
// decode kernel would cost (bench `persistent_chain/`); it needs every workgroup resident at once.
//
// memory_model: handoffs through the Vulkan memory model, not coherent buffers (phase_sync.h).
// Bindings: step, counters (phase_sync's), then per phase w, x, norm_weight, y. Push: eps (f32),
// phase_base (u32).
// Grid: (groups, 1, 1), groups = ternary_matvec_workgroups(target, dim, options).
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/target.h"
#include "ops/ternary/ternary_matvec.h"

namespace bdsl::ops {

dsl::Kernel persistent_chain_kernel(const OpTarget& target, const MatvecOptions& options, uint32_t dim, uint32_t phases,
                                    uint32_t groups, bool memory_model = false);

}  // namespace bdsl::ops
