// Ternary (W1.58 A8) matrix-vector products for decode, reading I2_S weights exactly as the GGUF
// stores them. CPU twin: golden::bitlinear / golden::ternary_dot (and golden::relu2_gate).
//
// Weights: one binding per tensor, the I2_S bytes viewed as uvec4 (16 bytes = half a 128-element
// block): rows * cols / 4 bytes of codes, then the f32 per-tensor scale at byte rows * cols / 4.
// cols is a multiple of 128, so a row is cols / 128 whole blocks, cols / 64 uvec4. Word w (0..7)
// of a block, shifted right by 6 - 2j and masked with 0x03030303, holds the codes (0..2) of the
// four consecutive elements 32j + 4w .. 32j + 4w + 3: they pair with one packed activation word.
// With the integer dot product the field is masked in place (code * 4^(3 - j) per byte; field 0
// shifted to code * 16, so every byte fits a signed dot), dotted with q (sdot4x8) and each
// field's sum shifted back exactly once at the end (or four plain multiplies without it).
// A lane takes a row's uvec4s lane, lane + subgroup, ...; a normed decode projection on a device
// of the target's subgroup size whose rows are whole words per lane (2,560 codes: 160 words over
// 32 lanes) takes single words instead, so that no lane idles in a pass (40 uvec4s over 32 lanes
// leave 24 idle in the second; bench/RESULTS.md run 10). In every form
//   acc = sum(code * q) - sum(q)   (exact int32: sum((code - 1) * q)),   y = acc / s * scale.
//
// Activations (input = Quantized): q (uvec4 view of quantize_activations' packed int8 words,
// element 4w + j in byte j of word w) and act (u32: act[0] = bits of the f32 s, act[1] = bits of
// the i32 sum of q), as quantize_activations writes them for token 0.
// Activations (input = NormalizeInWorkgroup): the f32 vector x and an RMSNorm weight; every
// workgroup recomputes RMSNorm + int8 quantization of x into shared memory before its rows (eps
// is a push constant). It exists to save the barrier-separated step (a few us) between
// a norm+quantize dispatch and the projection: attn_sub_norm -> attn_output and
// ffn_sub_norm -> ffn_down (and attn_norm -> QKV, ffn_norm -> gate/up) become one dispatch each,
// at the price of every workgroup reading the (10-27 KB, cache-resident) vector again. The
// fusion wins in all four places (bench/RESULTS.md, "Behind the code").
//
// Bindings, in order:
//   weights           uvec4  read        one per tensor (QKV: w_q, w_k, w_v; gate/up: w_gate, w_up)
//   Quantized:        x_q (uvec4, read), x_act (u32, read)
//   NormalizeInWorkgroup: x (f32, read, cols), norm_weight (f32, read, cols)
//   outputs           f32    write       one per tensor (QKV: y_q, y_k, y_v; gate/up: one y,
//                                        act(gate) * up);
//                            read-write with add_residual: y = y + proj (the residual stream)
//   accumulators      i32    write       only with write_accumulators: acc per row, per tensor
// Push constants: eps (f32), only with NormalizeInWorkgroup.
// Grid: (ternary_matvec_workgroups(target, total_rows), 1, 1) where total_rows is the sum of the
// tensors' rows (QKV) or rows (others). Each subgroup takes a row at a time, its lanes striding
// over the row's uvec4, reduced with subgroup_add; a workgroup owns rows_per_workgroup rows
// (times options.rows_per_subgroup: then a subgroup takes that many rows at once).
#pragma once
#include <cstdint>
#include <optional>

#include "dsl/dsl.h"
#include "ops/attention/attention_dims.h"
#include "ops/common/gate_activation.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

enum class DotProduct {
  Auto,          // Packed where target.int_dot_product, else PlainInteger
  Packed,        // sdot4x8 (OpSDotKHR) on whole masked words
  PlainInteger,  // bitfield_extract and 32-bit multiplies: any device
};
// QuantizeInWorkgroup: NormalizeInWorkgroup without the norm (no norm_weight binding, no eps):
// the int8 quantization of x itself, for a graph without sub-norms (`llama`, 1bitLLM's `bitnet`).
enum class MatvecInput { Quantized, NormalizeInWorkgroup, QuantizeInWorkgroup };

// Decode attention's deferred partials as the input (SplitKvTuning::defer_combine): the norm
// prologue combines the chunks itself where attention left them, and reads its output otherwise.
// The fields are the attention kernel's: its dims and context, its grid's chunks, attention_pass
// and defer_combine.
struct AttentionPartialsInput {
  AttentionDims dims;
  uint32_t context = 0, chunks = 0, pass = 0, defer = 0;
};

struct MatvecOptions {
  MatvecInput input = MatvecInput::Quantized;
  // With NormalizeInWorkgroup, decode, a kernel of its own: x is attention's output, or, where
  // attention left the combine to this kernel, its chunks' partials. Binds attention_step (u32
  // read), attention_partials (vec2 read) and attention_used (f32 write: the attention output
  // the norm read, written by workgroup 0, for dumps) after the outputs. The sum of squares then
  // runs over each invocation's words rather than in stride order (other bits than without).
  // A batch in tiles of one token (ternary_matmul, tokens_per_workgroup 1) may take it too:
  // attention_step is then the sequence records, x and the partials the batch's, there is no
  // attention_used, and the sum of squares keeps the stride order (the standalone quantizer's
  // bits, which the batch's other buckets use).
  std::optional<AttentionPartialsInput> attention_partials;
  bool add_residual = false;        // y = y + proj, y bound read-write (not for QKV)
  bool write_accumulators = false;  // extra i32 outputs with the exact accumulators
  DotProduct dot = DotProduct::Auto;
  // Rows a subgroup computes at once, sharing each activation load (QKV: must divide q_rows and
  // k_rows). The grid depends on it: pass the same options to ternary_matvec_workgroups (the
  // two-argument one assumes the default). The model takes the device's from ops/tuning.h.
  uint32_t rows_per_subgroup = 2;
  // Invocations per workgroup (whole subgroups, within the device's limit); 0: 256.
  uint32_t workgroup = 0;
};

// y[rows] = W[rows, cols] x.
dsl::Kernel ternary_matvec(const OpTarget& target, uint32_t rows, uint32_t cols, MatvecOptions options = {});

// Q, K and V in one dispatch: rows 0..q_rows-1 of the grid are Q, then K, then V.
dsl::Kernel ternary_matvec_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows,
                               uint32_t cols, MatvecOptions options = {});

// Decode QKV with NeoX RoPE and the F16 KV-cache write in the epilogue: one dispatch instead of
// ternary_matvec_qkv + rope_kv_write (whose results it reproduces bit for bit). Each subgroup
// computes rows (2m, 2m + 1, 2m + half, 2m + 1 + half) of one head, so lane 0 holds both halves
// of two RoPE pairs and two whole cache words. options.rows_per_subgroup is forced to 4.
// Bindings: w_q, w_k, w_v, the activations (as input says), step (u32 read: ops/common/step_state.h),
// rope_table (vec2 read: numerics::rope_table, as rope_kv_write), y_q (f32 write: q after RoPE),
// k_cache, v_cache (u32 write: [context, kv_words], rope_kv_write's layout). Push constants: eps
// (NormalizeInWorkgroup only). The position is step[pos]; a position at or past `context` writes
// no cache word.
// Grid: (ternary_matvec_qkv_rope_workgroups(target, dims, options), 1, 1).
dsl::Kernel ternary_matvec_qkv_rope(const OpTarget& target, const AttentionDims& dims, uint32_t cols, uint32_t context,
                                    MatvecOptions options = {});
uint32_t ternary_matvec_qkv_rope_workgroups(const OpTarget& target, const AttentionDims& dims, MatvecOptions options = {});

// y[r] = act(gate[r]) * up[r] (ops/common/gate_activation.h: ReLU² or SiLU), gate = W_gate x,
// up = W_up x: one subgroup computes row r of both (sharing the activation loads) and writes the
// product. Accumulators: gate's, then up's.
dsl::Kernel ternary_matvec_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, GateActivation activation,
                                   MatvecOptions options = {});

// The same kernels with their grids (ops/plan.h): what a recorder dispatches.
Plan plan_ternary_matvec(const OpTarget& target, uint32_t rows, uint32_t cols, const MatvecOptions& options = {});
Plan plan_ternary_matvec_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows, uint32_t cols,
                             const MatvecOptions& options = {});
Plan plan_ternary_matvec_qkv_rope(const OpTarget& target, const AttentionDims& dims, uint32_t cols, uint32_t context,
                                  const MatvecOptions& options = {});
Plan plan_ternary_matvec_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, GateActivation activation,
                                 const MatvecOptions& options = {});

uint32_t ternary_matvec_workgroup(const OpTarget& target);  // invocations per workgroup, default options
uint32_t ternary_matvec_workgroup(const OpTarget& target, const MatvecOptions& options);
uint32_t ternary_matvec_workgroups(const OpTarget& target, uint32_t total_rows);  // default options
uint32_t ternary_matvec_workgroups(const OpTarget& target, uint32_t total_rows, const MatvecOptions& options);

}  // namespace bdsl::ops
