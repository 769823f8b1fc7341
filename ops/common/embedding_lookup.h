// One row of the F16 token-embedding table ([vocab, dim] row-major, as stored in the GGUF) widened
// to f32. The table is read as u32 words holding two halves (unpack_half2x16), so no 16-bit
// storage feature is needed. A table larger than one binding may be split into `parts` bindings
// of `rows_per_part` rows each (the last may hold fewer); rows_per_part * dim * 2 bytes must then
// be a multiple of the device's storage-buffer offset alignment so each part starts on a word.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "dsl/builder.h"
#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

struct EmbeddingShape {
  uint32_t dim = 0;            // embedding length (any size, odd too)
  uint32_t rows_per_part = 0;  // vocab rows per table binding
  uint32_t parts = 1;          // table bindings
};

// Decode. Bindings: step (read, u32, ops/common/step_state.h: the token), table_0 .. table_{parts-1}
// (read, u32: F16 pairs), x (write, f32 [dim]). Push: none.
// Grid: ceil(dim / embedding_workgroup(target)) workgroups.
dsl::Kernel embedding_lookup(const OpTarget& target, const EmbeddingShape& shape);

// Prefill. Bindings: tokens (read, u32 [n]), table_0 .. table_{parts-1} (read, u32),
// x (write, f32 [n, dim]). Push: n (u32). Grid: (ceil(dim / embedding_workgroup(target)), n).
dsl::Kernel embedding_lookup_batch(const OpTarget& target, const EmbeddingShape& shape);

// A batch whose tokens may come from the device (pipelined decode steps: the step before wrote
// them, and the host never read them): tokens[row] is a token id, or fed_token_word(source, i):
// element i of binding fed_<source>, taken as the id where it is below `vocab` and as 0 otherwise.
// Bindings: tokens, fed_0 .. fed_{sources-1} (read, u32), the table's parts, x, as
// embedding_lookup_batch's. Push: n (u32). Grid: as embedding_lookup_batch's.
// With `staged`, the step's inputs come from the half of a staging buffer that a count of steps
// picks (ops/common/parity_copy.h's FromHalf, done here by the whole grid, one dispatch less):
// bindings counter (u32 read [1]) and staging (u32 read [2 * words]) instead of tokens, and inputs
// (u32 write [words]) last: inputs[i] = staging[(counter % 2) * words + i] for i < words, row y's
// token word read from the half at tokens_at + y.
inline constexpr uint32_t kFedTokenFlag = 0x80000000u;
inline constexpr uint32_t kFedSourceShift = 24, kFedMaxSources = 0x80, kFedMaxIndex = 1u << kFedSourceShift;
constexpr uint32_t fed_token_word(uint32_t source, uint32_t index) {
  return kFedTokenFlag | source << kFedSourceShift | index;
}
struct StagedInputs {
  uint32_t words = 0;      // a half of the staging buffer
  uint32_t tokens_at = 0;  // row 0's token word inside a half
};
dsl::Kernel embedding_lookup_fed(const OpTarget& target, const EmbeddingShape& shape, uint32_t vocab, uint32_t sources,
                                 std::optional<StagedInputs> staged = std::nullopt);

uint32_t embedding_workgroup(const OpTarget& target);

// The same with their grids (ops/plan.h); the batch grid's count is the tokens.
Plan plan_embedding_lookup(const OpTarget& target, const EmbeddingShape& shape);
Plan plan_embedding_lookup_batch(const OpTarget& target, const EmbeddingShape& shape);
Plan plan_embedding_lookup_fed(const OpTarget& target, const EmbeddingShape& shape, uint32_t vocab, uint32_t sources,
                               std::optional<StagedInputs> staged = std::nullopt);

// Runs body(p, token's row inside part p) for the part that holds `token`: the part boundaries
// compared in a short if-chain (uniform where the token is).
void for_embedding_part(const EmbeddingShape& shape, dsl::Expr<dsl::u32> token,
                        const std::function<void(uint32_t, dsl::Expr<dsl::u32>)>& body);

// The bindings a head that writes the next token's embedding declares: the table's parts as
// embed_table0 .. (u32 read), then x_next (f32 write [dim]).
struct NextEmbedding {
  std::vector<dsl::Buffer<dsl::u32>> table;
  dsl::Buffer<dsl::f32> x_next;
};
NextEmbedding declare_next_embedding(dsl::KernelBuilder& k, const EmbeddingShape& shape);

// Inside another kernel (a head that picks the next token): the `wg` invocations of one workgroup
// write `token`'s row widened to f32 into x, as embedding_lookup does (the next replay then starts
// with its first layer). shape.dim even; no barrier.
void emit_embedding_row(dsl::KernelBuilder& k, uint32_t wg, const EmbeddingShape& shape,
                        const std::vector<dsl::Buffer<dsl::u32>>& table, dsl::Expr<dsl::u32> token,
                        const dsl::Buffer<dsl::f32>& x);

}  // namespace bdsl::ops
