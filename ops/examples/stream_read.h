// A bandwidth probe: every invocation reads uvec4 words of a large buffer at a grid-wide stride
// and the workgroup writes one word, so the run time is the time to stream the buffer. The bench
// measures the device's peak read bandwidth with it, in the same run as the ops it rates.
#pragma once
#include <cstdint>

#include "dsl/builder.h"
#include "ops/target.h"

namespace bdsl::ops {

// Bindings: data (read, uvec4 [words]), out (write, u32 [workgroups]). Push: words (u32).
// Grid: (workgroups, 1, 1) of stream_read_workgroup(target) invocations; any count works.
dsl::Kernel stream_read(const OpTarget& target);
uint32_t stream_read_workgroup(const OpTarget& target);

}  // namespace bdsl::ops
