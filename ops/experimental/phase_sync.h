// Phases of one dispatch handing their results to each other through counters in device memory.
//
// A pipeline barrier between dispatches costs a few us of wall time per step; one device-wide
// handoff inside a dispatch costs less (bench `grid_sync/`, bench/RESULTS.md run 4). A kernel whose
// workgroup ranges are consecutive phases (ops/experimental/decode_layer.h) lets a phase's workgroups load
// their weights, then wait until every workgroup of the phase before has counted itself done,
// then read its results through coherent buffers. (Counters between *dispatches* do not help
// there: NVIDIA does not start a dispatch before the one before it ends, and the handoff then
// costs as much as the barrier; measured, branch `chained-dispatches`.)
//
// Why it cannot deadlock where workgroups start in index order (GPUs; lavapipe with one thread):
// a workgroup waits only for lower indices, so the lowest unfinished one waits for nothing. Where
// that fails, a wait gives up after `spin_limit` polls and sets the error word instead of
// hanging; the host then runs the token again without fused phases (models/bitnet/bitnet_model.cpp).
// A wait that leaves its loop any other way gives up too: lavapipe (Mesa's gallivm) ends every
// loop of an invocation after 65,535 passes in all, without an error, so on lavapipe with several
// threads (workgroups not in index order) a long wait used to fall through and read data from
// before it (tests/ops_experimental/phase_sync_test.cpp, docs/driver-notes.md).
//
// Measured (bench/RESULTS.md runs 4 and 5): the fused decode layers built on this are
// slower than separate kernels, because the union kernel takes more registers than its phases;
// and even one projection repeated in one dispatch with every workgroup resident (bench
// `persistent_chain/`) takes longer per phase than barrier-separated dispatches: the handoff
// through memory costs as much as the barrier it replaces.
//
// Two ways to hand over (`memory_model`):
// - coherent (the default): the phases' activations are coherent buffers (their loads bypass the
//   incoherent caches), barrier(true) around the counter.
// - the Vulkan memory model: the activations are handoff buffers (plain, cached accesses marked
//   NonPrivate), the workgroup's writes are released by device_barrier() before the counter's
//   atomic add, and a wait polls the counter with atomic_load, then acquires with device_barrier()
//   (dsl/control.h). Fewer registers than coherent buffers on NVIDIA (bench/RESULTS.md run 5:
//   ~45 for ffn_down). Run 5's try of device-scope barriers over plain buffers read stale data on
//   the H100 because its loads were private: glslang 12 marks accesses NonPrivate only under
//   `#pragma use_vulkan_memory_model`, which dsl's printer now emits for such kernels.
//
// Counters (u32, device memory the host can read): word kPhaseError, then counters at the words
// the kernel is given. They are never reset: the host numbers its submissions (StepState::epoch,
// 1, 2, ...) and a wait for `count` workgroups in submission e waits until the counter reaches
// e * count (compared modulo 2^32, so it wraps safely).
#pragma once
#include <cstdint>

#include "dsl/dsl.h"

namespace bdsl::ops {

inline constexpr uint32_t kPhaseError = 0;                 // non-zero: a wait gave up in this submission
inline constexpr uint32_t kPhaseCounterStride = 32;        // words between counters: one per 128-byte line
inline constexpr uint32_t kPhaseSpinLimit = 1u << 20;      // polls before a wait gives up (about a second on a GPU)

class PhaseSync {
 public:
  // counters: the binding (declare it with volatile_buffer<u32>(..., ReadWrite)); step: the step
  // state (for the epoch).
  PhaseSync(dsl::KernelBuilder& k, dsl::Buffer<dsl::u32> step, dsl::Buffer<dsl::u32> counters,
            uint32_t spin_limit = kPhaseSpinLimit, bool memory_model = false);

  // Every invocation calls it (it holds a workgroup barrier): returns once counter word `at`
  // has counted `count` workgroups in this submission, their writes visible to coherent loads
  // (to handoff buffers' loads with memory_model).
  void wait(dsl::Expr<dsl::u32> at, uint32_t count) const;
  // Every invocation calls it after its last write: the workgroup's writes are made visible,
  // then one invocation adds one to counter word `at`.
  void signal(dsl::Expr<dsl::u32> at) const;

 private:
  dsl::KernelBuilder& k_;
  dsl::Buffer<dsl::u32> step_, counters_;
  uint32_t spin_limit_;
  bool memory_model_;
};

}  // namespace bdsl::ops
