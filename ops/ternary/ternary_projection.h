// The kernel builder behind ternary_matvec (decode, one token) and ternary_matmul (prefill, a
// block of tokens): the same I2_S row dot, epilogues and fusions, with `tokens_per_workgroup`
// tokens sharing each weight load. Internal to ops/: include ternary_matvec.h or ternary_matmul.h.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dsl/dsl.h"
#include "ops/attention/attention_dims.h"
#include "ops/target.h"
#include "ops/ternary/ternary_matvec.h"

namespace bdsl::ops::detail {

// How the tensors' rows combine: kSeparate, one output per tensor; an activation, gate and up
// (the two tensors) give one output act(gate) * up.
using ProjectionCombine = std::optional<GateActivation>;
inline constexpr ProjectionCombine kSeparate = std::nullopt;

// QKV with RoPE and the KV-cache write in the epilogue (decode): the tensors are q, k, v (or
// only q, or only k and v); each subgroup takes rows (2m, 2m + 1, 2m + half, 2m + 1 + half) of
// one head.
struct RopeKvEpilogue {
  AttentionDims dims;
  uint32_t context = 0;
};

struct ProjectionTensor {
  std::string name;
  uint32_t rows;
};

// How a phase binds its activations and outputs when other workgroups of the dispatch write or
// read them meanwhile: not shared (a kernel of its own), coherent buffers, or handoff buffers
// ordered by the Vulkan memory model (dsl/kernel_builder.h; ops/experimental/phase_sync.h).
enum class Sharing { None, Coherent, Handoff };

// Where a decode projection's body is emitted: a kernel of its own (build_ternary_projection),
// or one phase of a kernel that runs several (ops/experimental/decode_layer.h). Bindings are declared by the
// body in the order ternary_matvec.h gives; what the kernel already has is passed in.
struct ProjectionSite {
  dsl::KernelBuilder* k = nullptr;
  dsl::Expr<dsl::u32> workgroup;                    // this workgroup's index among the projection's
  std::optional<dsl::Expr<dsl::f32>> eps;             // a push constant the kernel shares between phases
  std::optional<dsl::Buffer<dsl::u32>> step;        // the step state (RoPE), when already bound
  Sharing sharing = Sharing::None;  // activations and outputs written or read by other workgroups meanwhile
  std::function<void()> before_activations;  // runs after the weight prefetch, before x is read
  uint32_t rows_per_workgroup = 0;  // rows `workgroup` stands for; 0: the kernel's subgroups x rows per subgroup
  // Row groups per subgroup whose weights are loaded before the norm prologue (registers: rows
  // per subgroup x a row's uvec4 per lane, each): all of them where a workgroup takes many rows.
  uint32_t prefetch_passes = 1;
};

void emit_ternary_projection(const ProjectionSite& site, const OpTarget& target, const std::string& what,
                             const std::vector<ProjectionTensor>& tensors, uint32_t cols, ProjectionCombine combine,
                             const MatvecOptions& options, const RopeKvEpilogue* rope = nullptr);

// tokens_per_workgroup == 0: decode (token 0, no push constant); > 0: a `tokens` push constant
// and grid y = ceil(tokens / tokens_per_workgroup). one_token_step (with tiles of one token):
// steps of one token, token 0 a constant (grid y 1, the push constant unread).
dsl::Kernel build_ternary_projection(const OpTarget& target, const std::string& what,
                                     const std::vector<ProjectionTensor>& tensors, uint32_t cols,
                                     ProjectionCombine combine, const MatvecOptions& options,
                                     uint32_t tokens_per_workgroup, const RopeKvEpilogue* rope = nullptr,
                                     bool one_token_step = false);

}  // namespace bdsl::ops::detail
