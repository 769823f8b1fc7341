// ternary_matmul_coopmat's tiles with register_operands (ops/tuning.h's CoopTile): each subgroup
// reads its weights and activations from memory into its own matrices' elements, where the
// device holds PTX's mma.m16n8k32 fragments (ops/common/matrix_fragments.h), so the reduction runs with no
// shared memory and no barrier; the accumulators go to the output from the elements too.
//
// A subgroup multiplies row_tiles 16-row tiles of weights by token_tiles 8-token tiles. Per
// 128-column I2_S block, invocation (g, t) = (i / 4, i % 4) reads 8 bytes of each of its tile's
// rows g and g + 8, bytes 8t..8t+7 of the row's 32: codes of 32 columns, 4 columns at each of the 4
// shifts. The K step at shift 6 - 2s multiplies columns 32s..32s+31, which the fragment's
// positions 4t..4t+3 and 16+4t..19+4t take as columns 32s+8t..32s+8t+7; the activations are read
// in that same order (8 bytes of the step's 32 a token), so the products pair as in the sum.
// Bindings, push and grid: as ternary_matmul_coopmat (the tile's rows and tokens), without k_splits.
#pragma once
#include <cstdint>

#include "ops/ternary/ternary_matmul_coopmat.h"

namespace bdsl::ops {

// Throws std::invalid_argument unless the target holds PTX's fragments (OpTarget::int8_fragments).
dsl::Kernel ternary_matmul_fragments(const OpTarget& target, uint32_t rows, uint32_t cols, const CoopMatmulOptions& o);

}  // namespace bdsl::ops
