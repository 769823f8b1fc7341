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

// The count itself, by every invocation once its partial is written: handoff_barrier(), one
// invocation adds this workgroup to `counter` and sets is_last[0] to 1 where it is the last of
// `arrivals` (else 0), handoff_barrier() again; then is_last[0] says whether to combine.
template <class Ref>
void count_arrival(dsl::KernelBuilder& k, const OpTarget& t, const Ref& counter, dsl::Expr<dsl::u32> arrivals,
                   const dsl::Shared<dsl::u32>& is_last) {
  using namespace dsl;
  handoff_barrier(t);
  if_(k.local_index() == 0u, [&] {
    auto done_before = atomic_add(counter, 1u);
    is_last[0u] = select(done_before == arrivals - 1u, 1u, 0u);
  });
  handoff_barrier(t);
}

}  // namespace bdsl::ops
