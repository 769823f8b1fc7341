// Split-KV ("flash-decoding") attention over the F16 KV cache written by rope_kv_write: the
// kernel behind attention_decode and attention_prefill (they differ only in how many query
// tokens a dispatch serves). Internal to ops/; use those two.
//
// Grid (n_kv_heads * head_split, chunks, tokens): workgroup (kv * head_split + part, c, t) serves
// part `part` of the `group` query heads that share KV head kv (all of them with head_split 1,
// one with head_split = group), for query token t. The workgroups of one KV head read the same
// K/V rows; more of them, each with fewer heads in registers, finish sooner (H100: 9.9 us with
// 1, 7.0 with 4 at the 2B shape, bench/RESULTS.md run 7). Token t sees n = pos + t + 1 positions, where a pass is
// what one workgroup reads at once (rows x positions_per_pass positions): up to one pass they are
// one chunk (no combine); beyond, `active` = min(chunks, ceil(n / (pass / 2))) equal non-empty
// chunks at run time. Short contexts use few workgroups and a short combine, long ones all
// `chunks`, and the grid never depends on pos.
// Workgroups past `active` return at once.
//
// Inside a workgroup (256 invocations on the H100): a K/V row of one KV head (head_dim halves,
// 256 bytes at 128) is read by `lanes` lanes of a subgroup (16 on the H100, one uvec4 each), so a
// subgroup of 32 reads two rows per load; the workgroup's row groups take positions_per_pass
// consecutive positions each per pass, every K and V load of the pass issued before any
// arithmetic. Each lane keeps its slice of the group's query heads in registers (pre-scaled by
// 1/sqrt(head_dim)); a score is the lanes' partial dot products summed by a subgroup butterfly
// (shuffle xor). Each subgroup keeps an online softmax (max, sum, unnormalised sum of p * v): a
// pass's max and sum come from subgroup operations, with no barrier. Row groups merge within the
// subgroup by shuffles, subgroups through shared memory once at the end (one barrier), each
// rescaled to the largest max. With one active chunk the
// workgroup writes the output itself; otherwise it writes its partial (max, sum, average) with
// plain stores to a coherent buffer, barrier(true) (a buffer memory barrier), and counts itself
// done on an atomic counter per (t, kv); the last of the `active` workgroups merges all partials
// (online, combine_unroll chunks' loads in flight per invocation), writes the output and puts the
// counter back to zero for the next replay. One dispatch, one barrier-separated step: a separate
// combine dispatch would cost another ~2.2 us per layer on the H100.
//
// H100, 2B shape (20/5 heads, head_dim 128, context 4096), bitnet-dsl-bench `attention/` (one
// dispatch alone, median of 64 in a barrier chain, cache cold), us at pos 0/100/511/2047/4095:
//   this kernel (8 positions a pass, 16 chunks)      6.9   6.9   9.4  10.1  13.8
//   the same with barriers per pass (before)          7.8   7.9  10.2  10.9  15.7
//   2 / 4 / 16 positions a pass                       5.7 / 6.3 / 9.1 at pos 0, 9.1 / 8.6 / 11.4 at 511,
//                                                     18.1 / 15.0 / 13.9 at 4095
//   4 positions a pass, 32 chunks (before)            6.9   8.7   9.3  12.1  15.8
//   8 positions a pass, 32 chunks (2 waves at 4095)   -     7.9  10.0  11.0  19.4
//   the kernel before (atomics, fixed chunk length)  14.1  14.9  15.3  19.0  26.4
// In the model (`op/attention_decode_f16kv`, per layer, decode graph): 9.8-10.1 us at pos 100,
// 10.5-13.6 at 511, 19.6-20.7 at 4095 over the configurations above (18.9 at 511 before).
// What is left is fixed latency: ~7 us at pos 0 for a chain of step/q load, K/V load, three
// barriers and the output; the chunk combine (partials, counter, reload) adds ~1-2 us.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "dsl/dsl.h"
#include "ops/attention/attention_dims.h"
#include "ops/target.h"
#include "ops/ternary/ternary_matvec.h"

namespace bdsl::ops {

// Knobs that change the speed, never the result beyond rounding (the bench compares them).
struct SplitKvTuning {
  uint32_t positions_per_pass = 8;  // consecutive positions per row group and pass (loads in flight)
  uint32_t combine_unroll = 8;      // chunks' partials read at once by the combining workgroup
  uint32_t max_lanes_per_row = 0;   // lanes sharing one K/V row (0: up to a subgroup)
  // Decode: with 1 < active <= defer_combine chunks, leave the combine to the consumer (each
  // chunk's partial stays in `partials` and `out` is not written; MatvecOptions::
  // attention_partials in ternary_matvec.h) and cut chunks a whole pass long. It saves the
  // counter, the last workgroup's reload and a write: on an H100 +1.8% decode at ctx 512
  // (bench/RESULTS.md run 5). 0: combine here, always.
  uint32_t defer_combine = 0;
  // Workgroups per KV head, each serving group / head_split of its query heads (it must divide
  // the group): more, lighter workgroups reading the same K/V rows (the second from the L2). The
  // grid's x is then n_kv_heads * head_split; partials, counters and outputs are laid out as with 1.
  uint32_t head_split = 1;
};

// Positions one workgroup reads at once (the chunk unit): what a consumer of deferred partials
// needs to find the same `active` (attention_active_chunks); query_dim: a projected query's
// width (QueryProjection::dim; its shared memory can leave fewer subgroups), 0 without.
uint32_t attention_pass(const OpTarget& target, const AttentionDims& dims, const SplitKvTuning& tuning = {},
                        uint32_t query_dim = 0);
// The chunks in use for a token that sees last + 1 positions, with chunks of whole passes (the
// split defer_combine uses).
dsl::Expr<dsl::u32> attention_active_chunks(dsl::Expr<dsl::u32> last, uint32_t pass, uint32_t chunks);

// Decode attention that projects its own query heads (attention_decode_projecting_query): each
// workgroup computes its heads' q rows from the residual stream x (RMSNorm fused in front, RoPE
// after: ternary_matvec_qkv_rope's arithmetic, the same bits), keeps them in shared memory and
// writes them out (chunk 0's workgroups, for the consumer), then reads positions 0..pos-1 only:
// position pos is written by ternary_matvec_kv_rope in the same step, with no barrier between
// the two. It always leaves partials (defer_combine chunks, or its own combine in slot `chunks`)
// and the consumer merges position pos in (AttentionPartialsInput::current_position).
struct QueryProjection {
  uint32_t dim = 0;       // x's width: the projection's columns
  MatvecOptions options;  // NormalizeInWorkgroup; rows per subgroup and workgroup are the kernel's
};

// Bindings: step (read, u32: pos), q (read, f32 [tokens, n_heads*head_dim]),
// k_cache, v_cache (read, u32 [context, kv_words]), partials (read-write, u32
// [tokens * n_heads * chunks * (head_dim + 2)], scratch), counters (read-write, u32
// [tokens * n_kv_heads], zero before the first dispatch; left zero by every dispatch),
// out (write, f32 [tokens, n_heads*head_dim]). Push: n (u32) when `batch`, none otherwise.
// Grid: (n_kv_heads * head_split, chunks, tokens).
// With `query` (decode only): bindings step, k_cache, v_cache, partials (chunks + 1 slots:
// attention_partials_bytes(dims, chunks + 1, 1)), counters, q (write, f32 [n_heads*head_dim]:
// the query after RoPE), then the projection's w (uvec4 read: I2_S q weights), x (f32 read),
// norm_weight (f32 read), rope_table (vec2 read); push eps (f32).
dsl::Kernel attention_split_kv(const std::string& name, const OpTarget& target, const AttentionDims& dims,
                               uint32_t context, uint32_t chunks, bool batch, const SplitKvTuning& tuning = {},
                               const QueryProjection* query = nullptr);

uint32_t attention_workgroup(const OpTarget& target, const AttentionDims& dims);
// tuning.head_split (at least 1), checked against the group: the grid's x is n_kv_heads times it.
uint32_t attention_head_split(const AttentionDims& dims, const SplitKvTuning& tuning);
// The most chunks a token's positions are cut into: enough to fill a large GPU at the longest
// context (fewer are used at short positions).
uint32_t attention_chunks(const OpTarget& target, const AttentionDims& dims, uint32_t context);
// Bytes of the two scratch buffers for `tokens` query tokens.
uint64_t attention_partials_bytes(const AttentionDims& dims, uint32_t chunks, uint32_t tokens);
// Where chunk `chunk`'s partial of (token, kv) starts in `partials` (vec2 units): [group][head_dim
// / 2] output pairs (each the chunk's softmax-weighted average), then [group] (max, sum).
dsl::Expr<dsl::u32> partials_block(const AttentionDims& dims, uint32_t chunks, dsl::Expr<dsl::u32> token, dsl::Expr<dsl::u32> kv,
                                   dsl::Expr<dsl::u32> chunk);

// The consumer's side of defer_combine (MatvecOptions::attention_partials): word w (elements
// 4w .. 4w + 3) of decode attention's output, from x where attention wrote it or combined from
// the partials where it left them; `workgroup` 0 also writes it to `used`. For a kernel's norm
// prologue (QuantizeBody::load_word).
// With a.current_position: the query and the cache rows position pos is merged in from. The
// loader's set-up then computes every head's score at pos into shared memory (a barrier), unless
// a subgroup of target_subgroup lanes holds one head's words (the loader then sums the score
// over its subgroup; the kernel's words go to invocations in strides of workgroup_size).
struct AttentionCurrentPosition {
  dsl::Buffer<dsl::f32> q;
  dsl::Buffer<dsl::u32> k_cache, v_cache;
};
std::function<std::array<dsl::Expr<dsl::f32>, 4>(dsl::Expr<dsl::u32>)> attention_word_loader(
    dsl::KernelBuilder& k, const AttentionPartialsInput& a, const dsl::Buffer<dsl::f32>& x, const dsl::Buffer<dsl::u32>& step,
    const dsl::Buffer<dsl::vec2>& partials, const dsl::Buffer<dsl::f32>& used, dsl::Expr<dsl::u32> workgroup,
    const std::optional<AttentionCurrentPosition>& current = std::nullopt, uint32_t target_subgroup = 0,
    uint32_t workgroup_size = 0);

uint64_t attention_counters_bytes(const AttentionDims& dims, uint32_t tokens);

}  // namespace bdsl::ops
