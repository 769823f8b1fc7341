// The LM head's int8 shadow, for greedy decoding that reads half the bytes and still picks
// exactly the token the F16 head would (ops/head/lm_head_pruned.h). Per row r of the F16 table w:
//   s_r   = max|w_r| / 127 (f32), q_r = round(w_r / s_r) as int8;
//   d_r   >= s_r ||q_r||_2 (the int8 x's error enters through it), and
//   c_r   >= ||w_r - s_r q_r||_2 + gamma * (s_r ||q_r||_2 + ||w_r||_2), rounded up, where gamma
//           covers the f32 rounding of both dot products (2 * cols * 2^-24);
// so for any x, |(s_r q_r . x as the GPU sums it) - (w_r . x as the F16 head sums it)| <= c_r ||x||_2
// (Cauchy-Schwarz on the quantization error, the standard bound on a summation's rounding).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "models/bitnet/device_weights.h"
#include "ops/plan.h"

namespace bdsl::bitnet {

struct Int8Rows {
  std::vector<uint32_t> words;  // rows x cols / 4, element 4w + j of a row in byte j of word w
  std::vector<float> scale;     // s_r
  std::vector<float> bound;     // c_r, then d_r >= s_r ||q_r||_2 (rounded up): [rows][2]
};

// f16: rows x cols F16 bit patterns, row-major. cols: a multiple of 4. Uses every core.
Int8Rows quantize_rows_int8(std::span<const uint16_t> f16, uint32_t rows, uint32_t cols);
// The same into the caller's memory (words: rows x cols / 4, scale: rows, bound: rows x 2).
void quantize_rows_int8(std::span<const uint16_t> f16, uint32_t rows, uint32_t cols, std::span<uint32_t> words,
                        std::span<float> scale, std::span<float> bound);

// The shadow on the device: int8 rows in parts of the F16 table's rows_per_part (each part's
// bytes are half the F16 part's, so it fits wherever that one does), scales and (c_r, d_r).
struct GreedyHead {
  std::vector<rt::Buffer> parts;
  rt::Buffer scale, bound;
};
// The shadow of the F16 table already on the device (tied embedding or output.weight), derived
// there by ops/head/lm_head_shadow.h (`shadow`, planned for the table's shape and parts): no host
// copy and no second upload. quantize_rows_int8 is its host twin (the same rule; the f32 and
// double roundings may differ where a value falls near a half step, the bounds hold either way).
GreedyHead derive_greedy_head(rt::Context& ctx, const ops::PlannedPipeline& shadow, const SplitMatrix& table);
// The same quantized on the host (quantize_rows_int8, every core) from the mapped file, a block of
// rows at a time, straight into the device's memory where the host can write it (a CPU device:
// lavapipe, where BitNetPipelines has no shadow kernel and the host's arithmetic on all cores
// beats the device's emulation of it), else streamed up.
GreedyHead upload_greedy_head(rt::Context& ctx, const models::GgufFile& file, const models::BitNetConfig& config,
                              uint32_t rows_per_part);
// Device bytes upload_greedy_head allocates.
uint64_t greedy_head_bytes(const models::BitNetConfig& config);

}  // namespace bdsl::bitnet
