// RoPE's rotations as bitnet.cpp computes them: the angle pos * base^(-2i / rope_dim) in double,
// its cos and sin each rounded once to float. The CPU reference (golden/) and the GPU kernels'
// table (ops/attention/rope_kv_write.h) both come from here, so their rotations are the same bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace bdsl::numerics {

// The (cos, sin) that turns pair i of a head at position pos.
std::pair<float, float> rope_rotation(int64_t pos, std::size_t i, std::size_t rope_dim, float base);

// rope_rotation for positions 0..positions-1 and pairs 0..rope_dim/2-1, as [pos][i] (cos, sin)
// pairs. Throws std::invalid_argument for an odd or zero rope_dim.
std::vector<float> rope_table(uint32_t positions, std::size_t rope_dim, float base);

}  // namespace bdsl::numerics
