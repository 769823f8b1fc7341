// Which of a 16x8x32 int8 product's elements each invocation holds (dsl/matrix.h's element()):
// the API leaves it to the device. Kernels that fill their operands element by element
// (ops/ternary/ternary_matmul_fragments.h) assume PTX's mma.m16n8k32 fragments, the arrangement
// NVIDIA's tensor cores take; a probe reads the device's own before such a kernel is used.
//
// PTX's arrangement, with g = invocation / 4 and t = invocation % 4 in a subgroup of 32:
//   A (16 x 32), element i of 16: row g + 8 * (i / 4 % 2), column 4t + i % 4 + 16 * (i / 8);
//   B (32 x 8),  element i of 8:  row 4t + i % 4 + 16 * (i / 4), column g;
//   C (16 x 8),  element i of 4:  row g + 8 * (i / 2), column 2t + i % 2.
#pragma once
#include <cstdint>

#include "dsl/dsl.h"
#include "ops/target.h"
#include "runtime/context.h"

namespace bdsl::ops {

struct FragmentElement {
  uint32_t row, col;
  bool operator==(const FragmentElement&) const = default;
};
FragmentElement ptx_fragment_a(uint32_t invocation, uint32_t i);
FragmentElement ptx_fragment_b(uint32_t invocation, uint32_t i);
FragmentElement ptx_fragment_c(uint32_t invocation, uint32_t i);

constexpr uint32_t kFragmentProbeWords = 16 + 8 + 4;  // per invocation: A's, B's and C's elements

// Whether the target has what the probe needs: the 16x8x32 int8 shape and subgroups of 32.
bool target_has_probe_shape(const OpTarget& target);

// One subgroup of 32 loads an A, a B and a C whose elements name their own row and column, and
// writes each invocation's elements i as (row << 8) | col: kFragmentProbeWords words an invocation.
// Binding: elements (u32, write). Grid: 1. Needs the 16x8x32 int8 shape and subgroups of 32.
dsl::Kernel int8_fragments_probe(const OpTarget& target);

// Runs the probe: true when the device holds every element where PTX's arrangement says (false
// without the shape, or with other subgroups). Cached per device name within the process.
bool int8_fragments_are_ptx(rt::Context& ctx, const OpTarget& target);
// target with int8_ptx_fragments as the probe finds it.
OpTarget with_probed_fragments(rt::Context& ctx, OpTarget target);

}  // namespace bdsl::ops
