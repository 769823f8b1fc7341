// Kernel shapes that change how fast an op runs, never what it computes: one table for every
// device, the only place in the library that names one. Ops and the model read their defaults
// from tuning_for(target); bitnet-dsl-bench overrides them to compare shapes on a device.
#pragma once
#include <cstdint>
#include <optional>

#include "ops/target.h"

namespace bdsl::ops {

// A tensor-core matmul tile (the shape part of ternary_matmul_coopmat.h's CoopMatmulOptions).
struct CoopTile {
  uint32_t row_subgroups = 4;    // subgroups along the rows of a workgroup
  uint32_t token_subgroups = 2;  // subgroups along its tokens
  uint32_t row_tiles = 2;        // M-row tiles per subgroup
  uint32_t token_tiles = 4;      // N-token tiles per subgroup (accumulators: row_tiles x token_tiles)
  bool double_buffer = false;    // two stages in shared memory: one barrier per block, not two
  // Workgroups along the reduction (grid z; ternary_matmul_coopmat.h): for grids of few, long
  // workgroups (a step's few tokens, a prompt's short projections in large tiles). Not with
  // double_buffer.
  uint32_t k_splits = 1;
  // Each subgroup reads its operands from memory straight into its matrices' elements (PTX's
  // fragments: ops/ternary/ternary_matmul_fragments.h), so the reduction needs no shared memory
  // and no barrier. Only where the device's probe finds that arrangement (OpTarget::
  // int8_fragments); elsewhere the tile runs staged. Not with double_buffer or k_splits. Right on
  // the H100 but 1.75x slower there (bench/RESULTS.md run 42: a byte insert for every element
  // written, 125 registers): off in every row.
  bool register_operands = false;
};

struct Tuning {
  // Hand partials between a dispatch's workgroups through the Vulkan memory model where the device
  // has it, not coherent buffers (ops/common/handoff.h). Off: under the memory model lavapipe
  // (Mesa 22.3) drops the code after attention's chunk loop (docs/driver-notes.md), and it was
  // not faster on the H100 (bench/RESULTS.md run 32).
  bool memory_model_handoffs = false;
  // Decode projections with the norm fused in front (ops/ternary/ternary_matvec.h).
  uint32_t matvec_rows_per_subgroup = 2;
  uint32_t gate_up_workgroup = 128;           // gate/up's own workgroup size (0: as the others)
  uint32_t attn_output_rows_per_subgroup = 4;
  // Models at least wide_model_dim wide take these workgroup sizes for the norm-fused decode
  // projections (and gate/up): every workgroup quantizes the whole input vector, so a wider input
  // wants fewer, larger workgroups. H100 (bench/RESULTS.md run 21): the Llama3-8B shape 416 -> 544
  // tokens/s, Falcon3-10B 319 -> 369; the 2B (dim 2560) 859 -> 833 with them, so it keeps 256 / 128.
  // Only on devices that run workgroups of wide_matvec_workgroup invocations.
  uint32_t wide_model_dim = 3072;
  uint32_t wide_matvec_workgroup = 512;
  uint32_t wide_gate_up_workgroup = 256;
  uint32_t wide_attn_output_rows_per_subgroup = 2;  // Llama3-8B shape: 503 -> 536 tokens/s (run 21)
  // Decode attention (ops/attention/attention_split_kv.h, SplitKvTuning).
  uint32_t attention_positions_per_pass = 8;
  uint32_t attention_defer_chunks = 4;        // chunks whose combine attn_output does
  uint32_t attention_head_split = 0;          // workgroups per KV head; 0: one per query head
  // Batched decode's attention (attention_decode_sequences): the batch's tokens fill the GPU, so
  // few workgroups per KV head: 2 gave 6.69 ms a step at B = 64 against 6.89 with 1 and 6.95 with
  // 4 on the H100, and was faster at B = 1 and 16 too (bench/RESULTS.md run 13, calls 9-10).
  uint32_t sequences_attention_head_split = 2;
  // ... and its positions in fewer, longer chunks than one token's decode needs to fill the GPU
  // (a sequence's bits depend on it: one value for every bucket). Buckets of more lanes than
  // sequences_attention_spread_lanes take sequences_attention_chunks_per_workgroup chunks in each
  // workgroup (the same bits: each chunk its own partial), smaller ones a workgroup a chunk and
  // sequences_attention_spread_head_split workgroups per KV head (the same bits too). H100
  // (bench/RESULTS.md run 22, ctx 512, tokens/s): 2 chunks B = 1 753, B = 16 4,289, B = 64
  // 10,720; 4 chunks 772, 4,141, 10,258 (two a workgroup past 4 lanes; 4,202 and 10,184 one).
  // H200: 8 chunks at B = 1 no faster than 4; a split of 4 in the small buckets no faster.
  // Since the buckets leave the combine to their consumer (BatchOptions::defer_attention_combine;
  // chunks of whole passes; the one-lane bucket then takes the decode graph's head split), H200
  // (bench/RESULTS.md run 24, tokens/s): 4 chunks B = 1 844-849, B = 16 4,387-4,414, B = 64
  // 10,769-10,872; two a workgroup past 4 lanes 839-846, 4,246-4,346, 10,849-11,036; 2 chunks
  // 809-814, 4,472-4,494, 11,383-11,453; combined in the kernel (4 chunks) 807-816,
  // 4,392-4,396, 10,534-10,542. Two a workgroup only past 16 lanes: B = 16 4,342-4,354 (B = 64
  // the same); four a workgroup: B = 64 10,654.
  // 4 chunks trade 5% of B = 64 for 3.5% of B = 1, which the bar (B = 1 as fast as one
  // sequence's decode) asks for first. With the one-lane bucket's kernels for one token (run 25,
  // call 10): 2 chunks B = 1 849-859, B = 64 11,025-11,100; 4 chunks 855-867, 10,785-10,838.
  uint32_t sequences_attention_chunks = 4;
  uint32_t sequences_attention_spread_lanes = 16;
  uint32_t sequences_attention_chunks_per_workgroup = 2;
  uint32_t sequences_attention_spread_head_split = 2;
  // The batched LM head's workgroup (ops/head/lm_head_batch.h). 1024 spilled its rows' registers
  // on the H100 (46 ms against 5.7 at B = 64, bench/RESULTS.md run 12).
  uint32_t lm_head_batch_workgroup = 256;
  // Batched decode's pruned LM head: tails of at least this many lanes take their bounds from
  // one pass over the int8 shadow on tensor cores (ops/head/lm_head_bounds_coopmat.h), smaller
  // ones from lm_head_bounds with rows (the shadow read once per lane, as the decode graph does).
  uint32_t batch_head_coopmat_min_rows = 2;
  // Top-k's workgroup (ops/head/top_k.h).
  uint32_t top_k_workgroup = 1024;
  // Prompt blocks' tensor-core projections (ops/ternary/ternary_matmul_coopmat.h): the tile of
  // a projection whose rows and reduction are at most coop_short_tiles_past (Q, K, V,
  // attn_output), of one with more rows (gate, up), and of one with a longer reduction
  // (ffn_down). 64 x 64 by default: on an H200 (bench/RESULTS.md run 23) prefill-512 went 30.6k ->
  // 32.9k tokens/s with the short projections' 128 x 64 tiles made 64 x 64; every other tile,
  // two stages or more blocks a stage was slower in each class. The H100's row takes 64 x 32 for
  // the short class (run 30, ~1%) and 128 x 128 for the tall one (run 37, 1-2%); split
  // reductions (k_splits) were slower in every class there (run 37).
  uint32_t coop_short_tiles_past = 4096;
  // Prompt blocks run gate and up as one tensor-core dispatch whose epilogue writes act(gate) * up
  // (CoopMatmulOptions::gate_up): one f32 output of ffn_dim a token written and read, not two.
  // H100 (bench/RESULTS.md run 38): prefill-512 33.4k -> 35.9k tokens/s, 2,048 25.5k -> 26.9k.
  bool coop_gate_up_fused = true;
  CoopTile coop_tile_short{4, 2, 1, 4, false};
  CoopTile coop_tile_tall{4, 2, 1, 4, false};
  CoopTile coop_tile_deep{4, 2, 1, 4, false};
  // Prompt blocks attend on F16 tensor cores (ops/attention/attention_prefill_coopmat.h) from this
  // position on, when their token tiles give at least prefill_coopmat_attention_workgroups
  // workgroups. H200 (bench/RESULTS.md run 23), 512-token blocks: at position 0 the FMA kernel
  // served the graph better then (prefill-512 33.1k against 32.4k tokens/s); at 512 160 us against
  // 245, at 3584 765 against 1,224. With two subgroups a head (below) the tensor cores win at 0
  // too: H100 (run 40), the graph's 30 attention dispatches 1,595 us against the FMA's 2,518. The
  // workgroups' bound lies between what was measured: 20 (64 tokens, 18.0 us against 13.8) lost,
  // 160 (512) won.
  uint32_t prefill_coopmat_attention_from = 0;
  uint32_t prefill_coopmat_attention_workgroups = 128;
  // That kernel's position chunks: a block ending at position e cuts each token tile's K/V tiles
  // into up to e / 32 / prefill_coopmat_attention_chunk_tiles runs (0: one), merged by the last
  // workgroup. H100 (bench/RESULTS.md run 38), 512 tokens: 2 chunks 80 us against 68 at position
  // 0, 180 against 159 at 512, 629 against 745 at 3584; prefill-2,048 lost 1-10% with 2-8 tiles a
  // chunk, and won with a chunk per 32 tiles (1,024 positions: blocks from 1,024 on in 2-4
  // chunks): 2,048 tokens +2.4%, 4,096 +10% (24, 48 and 64 tiles gained less).
  uint32_t prefill_coopmat_attention_chunk_tiles = 32;
  // That kernel forms its softmax weights with a multiply by 2^10 / sum and splits them into F16
  // halves by truncation (an AND), not a division and a rounding (~14 operations a weight): the
  // same p x V within 2^-21 of p instead of 2^-22. H100 (bench/RESULTS.md run 39), 512 tokens:
  // 52 us against 71 at position 0, 121 against 158 at 512, 439 against 579 at 3584;
  // prefill-512 36.0k -> 36.8k tokens/s, 2,048 27.5k -> 30.2k. Position 0 still keeps the FMA
  // kernel (36.6k with the tensor cores from 0).
  bool prefill_coopmat_attention_lean_weights = true;
  // That kernel's subgroups per query head (1 or 2): with 2 each takes half of every K/V tile's
  // keys in the softmax steps and half of head_dim in p x V, so that a tile's chain of steps is
  // shorter and twice the subgroups share it. H100 (bench/RESULTS.md run 40), 512 tokens: alone 45
  // us against 52 at position 0, 102 against 121 at 512, 394 against 439 at 3584; after a 256 MB
  // read (its code cold, as in the graph) 53 against 68 at 0; in the graph at 0 53 us against 78.
  // With the tensor cores from position 0: prefill-512 35.8k -> 38.3k, 2,048 30.0k -> 32.3k.
  uint32_t prefill_coopmat_attention_subgroups_per_head = 2;
  // Batched decode's projections (models/bitnet/batch_decoder.h): steps of up to this many tokens
  // run the subgroup matmul (the matvec's row dot, one token tile; 16 tokens took 14.8 ms a step
  // against 4.0 on tensor cores), larger ones the tensor cores with tiles of
  // step_coop_row_subgroups x 16 rows and step_coop_token_subgroups subgroups across the step's
  // tokens: small tiles, so that a step of 64 tokens still fills the GPU. Measured on an H200
  // (bench/RESULTS.md run 13): 2 x 4 gave 6.71 ms at B = 64, 2 x 2 7.18, 4 x 2 6.81; the
  // two-stage variant was slower at every B.
  uint32_t step_subgroup_max_tokens = 8;
  // Steps of up to this many tokens normalize and quantize each token inside every projection's
  // workgroup (the decode graph's way), a workgroup a token, instead of a dispatch of their own
  // before it: four barrier-separated dispatches fewer a layer, each weight read once per token
  // (from the L2 after the first: 17.4 MB a layer fits an H100's). H100 (bench/RESULTS.md run
  // 31): B = 2 / 4 / 8 1.45 / 1.95 / 3.18 ms a step against 1.97 / 2.63 / 4.08-4.23 with the norms
  // apart; B = 16 on the subgroup matmul so 5.47 against 3.81-3.89 on the tensor cores. (Run 14's
  // tiles of several tokens, each quantized one after the other, made B = 4 slower instead.) A
  // device whose L2 holds less than a layer may want fewer: each token's workgroups read the
  // weights again.
  uint32_t step_norm_fused_max_tokens = 8;
  // Rows per subgroup of those steps' projections past one lane (0: the matmul's own, 2), but
  // for QKV with RoPE (4) and a merging attn_output (attn_output_rows_per_subgroup): gate/up and
  // ffn_down, in half the workgroups, whose norm prologue (each re-reads its token's vector) and
  // waves count more there than the parallelism. H100 (run 31, two processes each), ms a step at
  // B = 2 / 4 / 8: rows 2 1.45 / 1.95 / 3.17, rows 4 1.38-1.42 / 1.80-1.86 / 2.77-2.83, rows 8
  // 1.57-1.60 / 2.19-2.23 / 3.60-3.62.
  uint32_t step_rows_per_subgroup = 4;
  // Tokens a workgroup of those steps' projections, all normalized side by side (but attn_output
  // where it merges attention's chunks: one). H100 (run 31), ms a step at B = 2 / 4 / 8: one
  // 1.38-1.41 / 1.79-1.85 / 2.72-2.80, two 1.72-1.75 / 2.10-2.15 / 3.54-3.58, four slower still.
  uint32_t step_norm_tile_tokens = 1;
  uint32_t step_coop_row_subgroups = 2;
  uint32_t step_coop_token_subgroups = 4;
  bool step_coop_double_buffer = false;  // the tiles' two-stage variant (one barrier per block)
  // Those steps' tensor-core projections, in steps of up to step_coop_split_max_tokens tokens,
  // split their reduction (CoopMatmulOptions::k_splits) so that each workgroup multiplies about
  // step_coop_blocks_per_split 128-column blocks (0: no split): their few workgroups (K and V 20,
  // Q and ffn_down 80) otherwise wait on 20 or 54 blocks one after the other. H100 (bench/RESULTS.md
  // run 33), ms a step at B = 16 / 32 / 64: no split 3.76-3.84 / 4.61-4.71 / 5.96-6.03; 8 blocks
  // (3 shares of 2560 columns, 7 of 6912) 3.28-3.36 / 4.33-4.39 / 6.32-6.39; 6 blocks 3.21-3.26 /
  // 4.47-4.53; 5 blocks 3.45-3.52 / 4.62-4.66 / 6.59-6.67; 12 blocks 3.90-3.94 / 4.74-4.77. Past
  // 32 tokens no split: the atomics cost what the waits save (B = 64 and serve/clients:64 the
  // same with a limit of 64 or 128; a prompt's short blocks, 64 tokens, so never split). Nor in
  // grids of more than
  // step_coop_split_max_workgroups (0: any) workgroups: gate/up's 216 already fill the GPU, and
  // unsplit they gave 3.23-3.28 / 4.08-4.19 ms at B = 16 / 32 against 3.30-3.33 / 4.34-4.38 split
  // (64, splitting K and V alone: 3.76-3.77 / 4.56-4.63).
  uint32_t step_coop_blocks_per_split = 8;
  uint32_t step_coop_split_max_tokens = 32;
  uint32_t step_coop_split_max_workgroups = 128;
};

// The row of the table for this device (by name), or the default row; while an override is set,
// the override for every device.
const Tuning& tuning_for(const OpTarget& target);
// Whether any prompt tile asks for register operands: only then is the device's fragment order
// worth probing (ops/common/matrix_fragments.h).
inline bool asks_register_operands(const Tuning& t) {
  return t.coop_tile_short.register_operands || t.coop_tile_tall.register_operands || t.coop_tile_deep.register_operands;
}
// bitnet-dsl-bench's way to compare shapes on a device: every later tuning_for answers `t`
// (none: the table again). Not for the library or the tools.
void override_tuning(const std::optional<Tuning>& t);
// override_tuning(t) while in scope; the override in force before (or none) comes back at its end.
class ScopedTuning {
 public:
  explicit ScopedTuning(const Tuning& t);
  ~ScopedTuning();
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  std::optional<Tuning> previous_;
};

}  // namespace bdsl::ops
