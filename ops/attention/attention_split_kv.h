// Split-KV ("flash-decoding") attention over the F16 KV cache written by rope_kv_write: the
// kernel behind attention_decode and attention_prefill (they differ only in how many query
// tokens a dispatch serves). Internal to ops/; use those two.
//
// Grid (n_kv_heads * head_split, chunks, tokens): workgroup (kv * head_split + part, c, t) serves
// part `part` of the `group` query heads that share KV head kv (all of them with head_split 1,
// one with head_split = group), for query token t. The workgroups of one KV head read the same
// K/V rows; more of them, each with fewer heads in registers, finish sooner (bench/RESULTS.md
// run 7). Token t sees n = pos + t + 1 positions, where a pass is
// what one workgroup reads at once (rows x positions_per_pass positions): up to one pass they are
// one chunk (no combine); beyond, `active` = min(chunks, ceil(n / (pass / 2))) equal non-empty
// chunks at run time (with defer_combine or whole_pass_chunks: min(chunks, ceil(n / pass)),
// attention_active_chunks). Short contexts use few workgroups and a short combine, long ones all
// `chunks`, and the grid never depends on pos.
// Workgroups past `active` return at once.
//
// Inside a workgroup (up to 256 invocations): a K/V row of one KV head (head_dim halves, 256
// bytes at 128) is read by `lanes` lanes of a subgroup (one uvec4 each; 16 at head_dim 128), so a
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
// combine dispatch would cost another barrier-separated step per layer.
//
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
  // counter, the last workgroup's reload and a write (bench/RESULTS.md run 5). 0: combine here,
  // always.
  uint32_t defer_combine = 0;
  // Workgroups per KV head, each serving group / head_split of its query heads (it must divide
  // the group): more, lighter workgroups reading the same K/V rows (the second from the L2). The
  // grid's x is then n_kv_heads * head_split; partials, counters and outputs are laid out as with 1.
  uint32_t head_split = 1;
  // Chunks each workgroup takes, one after the other (grid y = ceil(chunks / this)). Every chunk
  // keeps its own positions and partial, so the results are the same bits whatever this is: a
  // batch of many sequences can run fewer, longer-lived workgroups than one sequence alone with
  // the same arithmetic.
  uint32_t chunks_per_workgroup = 1;
  // Cut chunks a whole pass long, as defer_combine does, without deferring: a batch whose
  // buckets combine in different places (some here, some in the consumer) cuts every token's
  // positions the same way, so its bits do not depend on the bucket.
  bool whole_pass_chunks = false;
};

// Positions one workgroup reads at once (the chunk unit): what a consumer of deferred partials
// needs to find the same `active` (attention_active_chunks).
uint32_t attention_pass(const OpTarget& target, const AttentionDims& dims, const SplitKvTuning& tuning = {});
// The chunks in use for a token that sees last + 1 positions, with chunks of whole passes (the
// split defer_combine uses).
dsl::Expr<dsl::u32> attention_active_chunks(dsl::Expr<dsl::u32> last, uint32_t pass, uint32_t chunks);

// Bindings: step (read, u32: pos), q (read, f32 [tokens, n_heads*head_dim]),
// k_cache, v_cache (read, u32 [context, kv_words]), partials (read-write, u32
// [tokens * n_heads * chunks * (head_dim + 2)], scratch), counters (read-write, u32
// [tokens * n_kv_heads], zero before the first dispatch; left zero by every dispatch),
// out (write, f32 [tokens, n_heads*head_dim]). Push: n (u32) when `batch`, none otherwise.
// Grid: (n_kv_heads * head_split, ceil(chunks / chunks_per_workgroup), tokens); without `batch`
// one token (z 1, token 0 a constant).
// one_sequence (with sequences): the kernel serves steps of one sequence, its record the first:
// token 0 is a constant (grid z 1), which the compiler turns into much cheaper code than the
// same kernel indexing by the grid's z (~10% of attention's time for one sequence on the H200).
dsl::Kernel attention_split_kv(const std::string& name, const OpTarget& target, const AttentionDims& dims,
                               uint32_t context, uint32_t chunks, bool batch, const SplitKvTuning& tuning = {},
                               bool sequences = false, bool one_sequence = false);

uint32_t attention_workgroup(const OpTarget& target, const AttentionDims& dims);
// tuning.head_split (at least 1), checked against the group: the grid's x is n_kv_heads times it.
uint32_t attention_head_split(const AttentionDims& dims, const SplitKvTuning& tuning);
// The chunks a workgroup takes (tuning.chunks_per_workgroup within 1..chunks), and the grid's y:
// the workgroups that take a token's `chunks`.
uint32_t attention_chunks_per_workgroup(uint32_t chunks, const SplitKvTuning& tuning);
uint32_t attention_chunk_workgroups(uint32_t chunks, const SplitKvTuning& tuning);
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
// the partials where it left them; `workgroup` 0 also writes it to `used` where given. For a
// kernel's norm prologue (QuantizeBody::load_word). With `token` (batched decode, a tile of one
// token): `step` holds the sequence records (ops/common/step_state.h) and x and the partials are
// the batch's, read at that token's.
std::function<std::array<dsl::Expr<dsl::f32>, 4>(dsl::Expr<dsl::u32>)> attention_word_loader(
    dsl::KernelBuilder& k, const AttentionPartialsInput& a, const dsl::Buffer<dsl::f32>& x, const dsl::Buffer<dsl::u32>& step,
    const dsl::Buffer<dsl::vec2>& partials, const std::optional<dsl::Buffer<dsl::f32>>& used, dsl::Expr<dsl::u32> workgroup,
    uint32_t workgroup_size = 0, std::optional<dsl::Expr<dsl::u32>> token = std::nullopt);

uint64_t attention_counters_bytes(const AttentionDims& dims, uint32_t tokens);

}  // namespace bdsl::ops
