// Phases of one dispatch handing their results to each other through counters in device memory.
//
// A pipeline barrier between dispatches costs a few us of wall time per step; one device-wide
// handoff inside a dispatch costs less (bench `grid_sync/`, bench/RESULTS.md run 4). A kernel whose
// workgroup ranges are consecutive phases (ops/experimental/decode_layer.h) lets a phase's workgroups load
// their weights, then wait until every workgroup of the phase before has counted itself done,
// then read its results (through coherent or handoff buffers, below). (Counters between *dispatches* do not help
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
// Measured (bench/RESULTS.md runs 4, 5 and 32): with the memory-model handoff a step inside a
// dispatch costs ~0.4 us less than a pipeline barrier (ffn_down + the next QKV fused: 27.6 us a
// layer against 27.9-28.2 separate), no more: a step is the data's round trip through the L2.
// All four phases fused stay slower (40.3 us: the union kernel takes 162 registers, its phases
// run in waves). Coherent buffers cost more than either.
//
// Two ways to hand over (`memory_model`):
// - coherent (the default): the phases' activations are coherent buffers (their loads bypass the
//   incoherent caches), barrier(true) around the counter.
// - the Vulkan memory model: the activations are handoff buffers (plain, cached accesses marked
//   NonPrivate), the workgroup's writes are released by device_barrier() before the counter's
//   atomic add, and a wait polls the counter with atomic_load, then acquires with device_barrier()
//   (dsl/control.h). Right on the H100 and lavapipe, and a little faster than coherent buffers
//   and than barriers (bench/RESULTS.md run 32: the four-phase chain 5.34-5.40 us a projection
//   against 6.03 coherent and 5.44-5.51 behind barriers; 108 registers against 127). Run 4's try
//   of device-scope barriers over plain buffers read stale data on the H100 because its loads
//   were private: glslang 12 marks accesses NonPrivate only under `#pragma use_vulkan_memory_model`,
//   which dsl's printer now emits for such kernels.
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
