// Per-token int8 quantization of f32 activations (docs/format.md: s = 127 / max(absmax, 1e-5),
// q = clamp(roundEven(x * s), -128, 127)), optionally with the RMSNorm in front
// (x / sqrt(mean(x^2) + eps) * w) so attn_norm / ffn_norm + quantize is one dispatch.
// CPU twin: golden::quantize_activations (after golden::rms_norm for the fused variant).
//
// Data layout (shared with ternary_matvec):
//   q    u32 words of packed int8: element 4w + j of a token is byte j of word w (dim / 4 words
//        per token, token t at word t * dim / 4). Read by the matvec as uvec4 (16 per 64 elements).
//   act  two u32 words per token t: act[2t] = the bits of the f32 scale s, act[2t + 1] = the bits
//        of the i32 sum of the token's q (ternary_matvec subtracts it: acc = sum(code*q) - sum(q)).
//
// Bindings, in order:
//   0 x            f32  read    [tokens, dim]
//     (with gate_up_input: gate, up  f32  read  [tokens, dim] each, in place of x; the input
//      is then act(gate) * up, as golden::relu2_gate or golden::silu_gate)
//   1 norm_weight  f32  read    [dim]            (only with rms_norm)
//   . q            u32  write   [tokens, dim / 4]
//   . act          u32  write   [tokens, 2]
//   . normalized   f32  write   [tokens, dim]    (only with write_normalized: x after the norm)
// Push constants: eps (f32), only with rms_norm.
// Grid: (tokens, 1, 1): one workgroup per token (the absmax and the mean need the whole vector).
// The workgroup is whole subgroups from the OpTarget; reductions are subgroup ops + shared memory.
#pragma once
#include <cstdint>
#include <array>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "dsl/dsl.h"
#include "ops/common/gate_activation.h"
#include "ops/common/norm_scale.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

struct QuantizeOptions {
  bool rms_norm = false;          // normalize by RMS and the norm weight first
  bool write_normalized = false;  // also write the normalized f32 vector (tests, debugging)
  // Read gate and up instead of x and quantize act(gate) * up: prefill's ffn_sub_norm (or the
  // plain quantize before ffn_down) takes the two tensor-core projections' outputs as they are,
  // with no dispatch to combine them.
  std::optional<GateActivation> gate_up_input;
  uint32_t workgroup = 0;         // invocations (whole subgroups); 0: the default for the target
};

// dim: a multiple of 4 (whole packed words).
dsl::Kernel quantize_activations(const OpTarget& target, uint32_t dim, QuantizeOptions options = {});
uint32_t quantize_activations_workgroup(const OpTarget& target, const QuantizeOptions& options = {});
// With its grid (ops/plan.h); the count is the tokens.
Plan plan_quantize_activations(const OpTarget& target, uint32_t dim, const QuantizeOptions& options = {});

// The kernel body, reusable by a kernel that quantizes into shared memory (the sub-norm fused
// matvec). Every invocation of the workgroup runs it; it contains barriers.
struct QuantizeBody {
  uint32_t dim = 0;
  uint32_t workgroup = 0;
  std::function<dsl::Expr<dsl::f32>(dsl::Expr<dsl::u32>)> load_x;            // element i
  std::function<dsl::Expr<dsl::f32>(dsl::Expr<dsl::u32>)> load_norm_weight;  // empty: no norm
  std::optional<dsl::Expr<dsl::f32>> eps;                                     // with the norm
  std::function<void(dsl::Expr<dsl::u32>, dsl::Expr<dsl::u32>)> store_q;      // word, 4 x int8
  std::function<void(dsl::Expr<dsl::u32>, dsl::Expr<dsl::f32>)> store_normalized;  // may be empty
  // Optional: the four elements of word w at once (instead of load_x); the sum of squares is
  // then taken over the words' elements, in slot order, rather than from load_x in stride order.
  std::function<std::array<dsl::Expr<dsl::f32>, 4>(dsl::Expr<dsl::u32>)> load_word;
  // With load_word: the sum of squares still in load_x's stride order (the standalone kernel's
  // bits), read back from the words staged in shared memory (dim floats and a barrier more).
  bool stride_order_squares = false;
  // With the norm: its scale in f32, or as bitnet.cpp's ggml rounds it, the squares summed in f64
  // (ops/common/norm_scale.h; the device needs shaderFloat64). Set from norm_scale_mode(target, workgroup).
  NormScaleMode norm_scale = NormScaleMode::F32;
};
struct QuantizedTotals {
  dsl::Expr<dsl::f32> scale;  // s, the same in every invocation
  dsl::Expr<dsl::i32> sum;    // sum of q, the same in every invocation
};
QuantizedTotals emit_quantize_activations(dsl::KernelBuilder& k, const QuantizeBody& body);
// Several tokens' bodies at once (one shape, the same norm weight, load_x not load_word past one
// token), their passes side by side behind one barrier each: each token's bits as alone.
std::vector<QuantizedTotals> emit_quantize_activations(dsl::KernelBuilder& k, std::span<const QuantizeBody> bodies);
// A kernel that quantizes one token a workgroup: `body` (its store_q set here) writes token
// `token`'s packed words at q[token * dim / 4 ..] and act[2 token], act[2 token + 1] (the scale's
// bits, the sum of q), as quantize_activations lays them out.
void emit_token_quantize(dsl::KernelBuilder& k, QuantizeBody body, const dsl::Buffer<dsl::u32>& q,
                         const dsl::Buffer<dsl::u32>& act, dsl::Expr<dsl::u32> token);

}  // namespace bdsl::ops
