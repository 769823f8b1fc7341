// The kernel builder behind ternary_matvec (decode, one token) and ternary_matmul (prefill, a
// block of tokens): the same I2_S row dot, epilogues and fusions, with `tokens_per_workgroup`
// tokens sharing each weight load. Internal to ops/: include ternary_matvec.h or ternary_matmul.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsl/dsl.h"
#include "ops/attention_dims.h"
#include "ops/target.h"
#include "ops/ternary_matvec.h"

namespace bdsl::ops::detail {

enum class ProjectionCombine { Separate, Relu2Product };

// QKV with RoPE and the KV-cache write in the epilogue (decode): the tensors are q, k, v; each
// subgroup takes rows (2m, 2m + 1, 2m + half, 2m + 1 + half) of one head.
struct RopeKvEpilogue {
  AttentionDims dims;
  uint32_t context = 0;
};

struct ProjectionTensor {
  std::string name;
  uint32_t rows;
};

// tokens_per_workgroup == 0: decode (token 0, no push constant); > 0: a `tokens` push constant
// and grid y = ceil(tokens / tokens_per_workgroup).
dsl::Kernel build_ternary_projection(const OpTarget& target, const std::string& what,
                                     const std::vector<ProjectionTensor>& tensors, uint32_t cols,
                                     ProjectionCombine combine, const MatvecOptions& options,
                                     uint32_t tokens_per_workgroup, const RopeKvEpilogue* rope = nullptr);

}  // namespace bdsl::ops::detail
