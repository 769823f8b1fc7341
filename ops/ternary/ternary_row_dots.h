// The I2_S row dot products of the ternary projections (ternary_projection.cpp, for the decode
// matvecs, the prefill matmul and the fused decode layers): a subgroup's sum(code * q) over one
// weight row of each tensor. Internal to ops/.
//
// A row's codes are read as uvec4 chunks (64 codes, lane, lane + subgroup, ...) or, where a
// normed decode projection's rows are whole words per lane, single words (emit_row_word_dots).
// With the integer dot product each 2-bit field is masked in place and its sum scaled back by an
// exact shift (ternary_matvec.h); without it, plain multiplies.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "dsl/dsl.h"
#include "ops/target.h"

namespace bdsl::ops::detail {

// Field j's codes (bit 6 - 2j) of word w left in place, as bytes code * 4^(3 - j), not shifted
// down to code: one AND instead of a shift and an AND. Field 0 (bit 6, code * 64 up to 128)
// alone is shifted, to code * 16 like field 1, so that every byte is at most 32 and a signed
// dot reads it right (a mixed-signedness dot, OpSUDotKHR, of field 0 in place measured ~0.5%
// faster: not worth a second dot instruction). The projections' dot products are bound by their
// instruction count (bench/RESULTS.md run 10).
dsl::Expr<dsl::u32> masked_field(const dsl::Expr<dsl::u32>& w, uint32_t j);

// q's uvec4 i of token t.
using QuadLoader = std::function<dsl::Expr<dsl::uvec4>(dsl::Expr<dsl::u32>, dsl::Expr<dsl::u32>)>;

struct TokenSlot {
  dsl::Expr<dsl::u32> token;
  std::optional<dsl::Expr<dsl::boolean>> valid;  // empty: always (decode)
};

// The chunks a lane takes in one pass: all of a row's where the device runs the target's
// subgroup size. Batched (prefill) tiles already keep each lane busy with several tokens per
// load: one chunk.
uint32_t chunk_unroll(uint32_t chunks, uint32_t target_subgroup, size_t tokens);

// A tensor's I2_S codes as a kernel reads them: uvec4 chunks of 64 codes, or single words of 16
// (word units, emit_row_word_dots).
using WeightBuffer = std::variant<dsl::Buffer<dsl::uvec4>, dsl::Buffer<dsl::u32>>;

// A subgroup's weights for its first pass over its first row group, loaded before the norm
// prologue so that their memory latency overlaps its reductions and barriers: [pass][weight row].
struct Prefetch {
  std::vector<std::vector<dsl::Var<dsl::uvec4>>> wv;  // chunks
  std::vector<std::vector<dsl::Var<dsl::u32>>> ww;    // or words
};
Prefetch declare_prefetch(dsl::KernelBuilder& k, uint32_t unroll, size_t weight_rows, const std::string& tag, bool words);
// units: a row's chunks or words.
void fill_prefetch(dsl::KernelBuilder& k, Prefetch& p, const std::vector<WeightBuffer>& w,
                   const std::vector<dsl::Expr<dsl::u32>>& row_base, uint32_t units);

// Zero words after q in shared memory for emit_row_dots' zero_quad: quads zero_quad + 0, 2, 4, 6.
inline constexpr uint32_t kZeroQWords = 28;

// Where q word i (elements 4i..4i+3) sits in shared memory for word units: the 32 words of block
// b (128 elements) rotated by 8 (b % 4) words. A read of emit_row_word_dots (lane l: word 32 b +
// 8j + l % 8, b = l / 8 + 4u) then puts the 32 lanes on 32 banks instead of four to a bank.
dsl::Expr<dsl::u32> swizzled_q_word(dsl::Expr<dsl::u32> i);

// emit_row_dots with word units (decode; q in shared memory, stored swizzled_q_word; the target's
// subgroup size; the integer dot product): lane l takes the row's words l, l + sg, ... (cols / 16
// a row, a multiple of the subgroup), so every lane works in every pass, where a row of 40 chunks
// (2,560 codes) over 32 lanes leaves 24 lanes idle in the second. Word w is word w % 8 of block
// w / 8; its field j (bit 6 - 2j) pairs with q word 32 (w / 8) + 8j + w % 8. result[t][0] as
// emit_row_dots'.
std::vector<std::vector<dsl::Expr<dsl::i32>>> emit_row_word_dots(dsl::KernelBuilder& k, const std::vector<WeightBuffer>& w,
                                                                 const std::vector<dsl::Expr<dsl::u32>>& row_base, uint32_t words,
                                                                 const dsl::Shared<dsl::u32>& q, const OpTarget& target,
                                                                 const Prefetch* pre);

// The subgroup's sum(code * q) over one row of each tensor (all with `chunks` uvec4 per row) for
// each token: result[t][s]. row_base[t] is the uvec4 index where tensor t's row starts. Each
// weight uvec4 is loaded once and used for every token. Every lane gets the sums.
// A lane's chunks (lane, lane + subgroup size, ...) are written out, not looped over: all its
// weight loads are in flight at once (a loop pays one memory round trip per chunk).
// The outer loop only runs again where the device picks a smaller subgroup than the target's.
// pre: the first pass's weights, already loaded. zero_quad: a q uvec4 index whose quads +0, 2, 4,
// 6 read zeros (q in shared memory), so that a chunk slot past the row's end counts 0 with no
// select per row.
std::vector<std::vector<dsl::Expr<dsl::i32>>> emit_row_dots(dsl::KernelBuilder& k, const std::vector<WeightBuffer>& w,
                                                            const std::vector<dsl::Expr<dsl::u32>>& row_base, uint32_t chunks,
                                                            const std::vector<TokenSlot>& tokens, const QuadLoader& q,
                                                            bool packed, const OpTarget& target, const Prefetch* pre = nullptr,
                                                            std::optional<uint32_t> zero_quad = std::nullopt);

}  // namespace bdsl::ops::detail
