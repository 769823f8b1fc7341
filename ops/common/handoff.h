// Workgroups of one dispatch handing results to each other (the last of them to count itself
// done combines the others' partials): each writes its partial, handoff_barrier(), counts itself
// on an atomic; the one that counts last runs handoff_barrier() again and reads them all.
// With ops/tuning.h's memory_model_handoffs, where the device has the Vulkan memory model, the
// partials are handoff buffers and the barriers device-scope acquire/release (dsl/control.h's
// device_barrier): plain cached loads instead of coherent ones (bench/RESULTS.md run 32).
// Otherwise (the default) coherent buffers and barrier(true).
#pragma once
#include <string>

#include "dsl/dsl.h"
#include "ops/target.h"
#include "ops/tuning.h"

namespace bdsl::ops {

inline bool handoff_memory_model(const OpTarget& t) { return t.memory_model && tuning_for(t).memory_model_handoffs; }

// The partials' buffer: a handoff buffer under the memory model, else a coherent one.
template <class T>
dsl::Buffer<T> partials_buffer(dsl::KernelBuilder& k, const OpTarget& t, std::string name, dsl::Access access) {
  return handoff_memory_model(t) ? k.handoff_buffer<T>(std::move(name), access) : k.coherent_buffer<T>(std::move(name), access);
}

// A kernel name's mark where its partials go through the memory model ("_mm"), so that the two
// variants are told apart in the bench's tables.
inline std::string handoff_suffix(const OpTarget& t) { return handoff_memory_model(t) ? "_mm" : ""; }

// Every invocation: before the count (release) and after it (acquire).
inline void handoff_barrier(const OpTarget& t) {
  if (handoff_memory_model(t))
    dsl::device_barrier();
  else
    dsl::barrier(true);
}

}  // namespace bdsl::ops
