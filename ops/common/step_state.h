// The step state: a small device buffer the host rewrites before each replay of a recorded graph,
// so nothing that changes per token lives in push constants or in a grid. Kernels bind it as a
// read-only u32 buffer and read the words below.
//
//   word 0  token   the token id being decoded (decode graph; prefill reads a token-ids buffer)
//   word 1  pos     decode: the position of that token; prefill: the position of the block's
//                   first token (token t of the block is at pos + t)
//   word 2  zero    always 0: a zero the shader compilers cannot see, for kernels that must keep
//                   arithmetic from being folded away (tests/ops_experimental/phase_sync_test.cpp)
//   word 3  epoch   the number of this submission of the decode graph (1, 2, ...): phases of
//                   one dispatch wait for epoch * workgroups on the counter of the phase before
//                   (ops/experimental/phase_sync.h). The buffer is 16 bytes, one minimal slice.
#pragma once
#include <cstdint>

namespace bdsl::ops {

struct StepState {
  uint32_t token = 0;
  uint32_t pos = 0;
  uint32_t zero = 0;
  uint32_t epoch = 0;
};
static_assert(sizeof(StepState) == 16);

inline constexpr uint32_t kStepToken = 0;  // word index of `token`
inline constexpr uint32_t kStepPos = 1;    // word index of `pos`
inline constexpr uint32_t kStepZero = 2;   // word index of `zero`
inline constexpr uint32_t kStepEpoch = 3;  // word index of `epoch`

// Batched decode (several sequences in one step, each token its own): one record per token, four
// words apart. The token's cache rows are rows first_row + 0..pos of the cache buffers.
struct SequenceState {
  uint32_t token = 0;
  uint32_t pos = 0;
  uint32_t first_row = 0;
  uint32_t unused = 0;
};
static_assert(sizeof(SequenceState) == 16);
inline constexpr uint32_t kSequenceWords = 4;
inline constexpr uint32_t kSequencePos = 1;       // word index of `pos` in a record
inline constexpr uint32_t kSequenceFirstRow = 2;  // word index of `first_row`

}  // namespace bdsl::ops
