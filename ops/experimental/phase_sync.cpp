#include "ops/experimental/phase_sync.h"

#include "ops/common/step_state.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

PhaseSync::PhaseSync(KernelBuilder& k, Buffer<u32> step, Buffer<u32> counters, uint32_t spin_limit, bool memory_model)
    : k_(k), step_(step), counters_(counters), spin_limit_(spin_limit), memory_model_(memory_model) {}

void PhaseSync::wait(Expr<u32> at, uint32_t count) const {
  if_(k_.local_index() == 0u, [&] {
    auto target = let("phase_target", step_[kStepEpoch] * count);
    auto spins = k_.var<u32>("phase_spins", 0u);
    auto reached = k_.var<u32>("phase_reached", 0u);
    loop([&] {
      // A volatile load (an atomic one under the memory model): read again on every pass.
      auto seen = memory_model_ ? atomic_load(counters_[at]) : Expr<u32>(counters_[at]);
      if_(bitcast<i32>(seen - target) >= 0, [&] {
        reached = 1u;
        break_();
      });
      spins += 1u;
      if_((Expr<u32>(spins) & 31u) == 0u, [&] {
        // Another wait gave up: so does every later one (checked now and then: it is rare).
        if_(Expr<u32>(counters_[kPhaseError]) != 0u, [] { break_(); });
        if_(Expr<u32>(spins) >= spin_limit_, [] { break_(); });
      });
    });
    // Any way out of the loop but the target is a give-up, also one no break took: lavapipe
    // leaves every loop of an invocation after 65,535 passes in all (gallivm's loop limiter),
    // and the phase after would read data from before the wait (tests/ops_experimental/phase_sync_test.cpp).
    if_(Expr<u32>(reached) == 0u, [&] { atomic_or(counters_[kPhaseError], 1u); });
  });
  // With buffer memory semantics: a plain barrier orders shared memory only, so the loads after
  // it could move before the wait. It costs ~0.5 us a handoff (bench `grid_sync/`): the memory
  // barrier also waits for the weight loads still in flight.
  if (memory_model_)
    device_barrier();  // acquire: the released writes become visible to the handoff buffers' loads
  else
    barrier(true);
}

void PhaseSync::signal(Expr<u32> at) const {
  if (memory_model_) {
    device_barrier();  // release: every invocation's writes, before the count
  } else {
    memory_barrier_buffer();
    barrier(true);
  }
  if_(k_.local_index() == 0u, [&] { atomic_add(counters_[at], 1u); });
}

}  // namespace bdsl::ops
