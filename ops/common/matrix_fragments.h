// Which of a 16x8x32 int8 product's elements each invocation holds (dsl/matrix.h's element()):
// the API leaves it to the device. Kernels that fill their operands element by element
// (ops/ternary/ternary_matmul_fragments.h) rely on each invocation holding PTX's mma.m16n8k32
// fragment elements (what NVIDIA's tensor cores take), in an order the probe reads from the device
// (OpTarget::int8_fragments) before such a kernel is used.
//
// PTX's arrangement, with g = invocation / 4 and t = invocation % 4 in a subgroup of 32:
//   A (16 x 32), element i of 16: row g + 8 * (i / 4 % 2), column 4t + i % 4 + 16 * (i / 8);
//   B (32 x 8),  element i of 8:  row 4t + i % 4 + 16 * (i / 4), column g;
//   C (16 x 8),  element i of 4:  row g + 8 * (i / 2), column 2t + i % 2.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

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

// The order the probe's words show (kFragmentProbeWords an invocation): none unless every
// invocation's elements are PTX's fragment elements, each in the same place for every invocation.
std::optional<Int8FragmentOrder> int8_fragment_order(const std::vector<uint32_t>& probe_words);
// Runs the probe on the device: its order, or none (also without the shape, or with other
// subgroups). Cached per device name within the process.
std::optional<Int8FragmentOrder> probe_int8_fragments(rt::Context& ctx, const OpTarget& target);
// target with int8_fragments as the probe finds it.
OpTarget with_probed_fragments(rt::Context& ctx, OpTarget target);

}  // namespace bdsl::ops
