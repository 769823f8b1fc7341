// The LM head: logits[vocab] = E[vocab, dim] x, E the F16 token embedding table as stored
// (row-major, tied to token_embd.weight), x f32, accumulation in f32. CPU twin:
// golden::DenseRows::dot_row (ReferenceModel::logits).
//
// The 2B table is 656 MB, more than some devices can bind at once (lavapipe:
// maxStorageBufferRange 128 MiB), so it is split into `parts` bindings of whole rows, each at most
// target.max_storage_buffer_range bytes: part p holds rows [p * rows_per_part, ...). A part's
// byte size is a multiple of 256, so the parts can also be slices of one buffer at offsets
// p * part_bytes (any minStorageBufferOffsetAlignment divides 256).
// F16 pairs are read as u32 (uvec4 when dim % 8 == 0) and unpacked with unpackHalf2x16, which
// every device runs (no 16-bit storage needed).
//
// Bindings, in order:
//   0             x       f32 (vec4 when dim % 8 == 0)  read   [dim]
//   1 .. parts    table_p u32 (uvec4 when dim % 8 == 0) read   rows of part p, dim / 2 words each
//   parts + 1     logits  f32                           write  [vocab]
// Push constants: none.
// Grid: (lm_head_workgroups(target, vocab), 1, 1). One subgroup per row at a time, lanes striding
// over the row, subgroup_add; a workgroup owns rows_per_workgroup consecutive rows.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <tuple>
#include <vector>

#include "dsl/dsl.h"
#include "ops/plan.h"
#include "ops/target.h"

namespace bdsl::ops {

struct LmHeadSplit {
  uint32_t rows_per_part = 0;
  uint32_t parts = 0;
  uint64_t part_bytes = 0;  // bytes of a full part (the last may be shorter)
  uint32_t rows_in_part(uint32_t p, uint32_t vocab) const;
};

// dim: even. Throws when one row does not fit in max_storage_buffer_range.
LmHeadSplit lm_head_split(const OpTarget& target, uint32_t vocab, uint32_t dim);
dsl::Kernel lm_head(const OpTarget& target, uint32_t vocab, uint32_t dim);
// With the parts an uploader already chose (e.g. models/bitnet's SplitMatrix::rows_per_part): each
// part must still fit max_storage_buffer_range; part offsets in one buffer are then the caller's.
dsl::Kernel lm_head(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part);
uint32_t lm_head_workgroups(const OpTarget& target, uint32_t vocab);
// lm_head with its grid (ops/plan.h): the table split as lm_head_split chooses, or the uploader's.
Plan plan_lm_head(const OpTarget& target, uint32_t vocab, uint32_t dim);
Plan plan_lm_head(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part);
// The split with the uploader's rows_per_part, checked as lm_head does.
LmHeadSplit lm_head_split(const OpTarget& target, uint32_t vocab, uint32_t dim, uint32_t rows_per_part);

// For kernels that need some rows' logits bit for bit as lm_head computes them (lm_head_pruned.h):
// the bindings x and table parts, declared in lm_head's order, and the row computation itself.
struct LmHeadRows {
  using Bindings = std::tuple<std::optional<dsl::Buffer<dsl::f32>>, std::optional<dsl::Buffer<dsl::vec4>>,
                              std::vector<dsl::Buffer<dsl::u32>>, std::vector<dsl::Buffer<dsl::uvec4>>>;
  LmHeadSplit split;
  uint32_t dim;
  std::optional<dsl::Buffer<dsl::f32>> x1;  // dim % 8 != 0
  std::optional<dsl::Buffer<dsl::vec4>> x4;
  std::vector<dsl::Buffer<dsl::u32>> t1;
  std::vector<dsl::Buffer<dsl::uvec4>> t4;
  // Where this x starts in its binding, in the binding's elements (vec4, or f32 where dim % 8 != 0):
  // a batch's row of x. None: at 0.
  std::optional<dsl::Expr<dsl::u32>> x_base = std::nullopt;
  // Row `row`'s logit (subgroup-uniform: every lane of the subgroup must run it) handed to `use`.
  void logit(dsl::KernelBuilder& k, dsl::Expr<dsl::u32> row, const std::function<void(dsl::Expr<dsl::f32>)>& use) const;
  // Whether logits() can take several rows at once: a table of one part, read as uvec4.
  bool several_at_once() const { return split.parts == 1 && !t4.empty(); }
  // The logits of `rows` (in range, subgroup-uniform), each bit for bit as logit() computes it, from
  // one pass over the quads that loads every row's quad before the arithmetic: the rows pay one
  // memory latency together rather than one each. Only where several_at_once().
  std::vector<dsl::Expr<dsl::f32>> logits(dsl::KernelBuilder& k, const std::vector<dsl::Expr<dsl::u32>>& rows) const;
};
// Runs body(p, local row) for the part that holds `row`: an if/else chain over the parts.
void for_row_part(const LmHeadSplit& split, dsl::Expr<dsl::u32> row,
                  const std::function<void(uint32_t, dsl::Expr<dsl::u32>)>& body);
uint32_t lm_head_workgroup(const OpTarget& target);  // invocations of lm_head's workgroups
LmHeadRows::Bindings lm_head_bindings(dsl::KernelBuilder& k, uint32_t dim, uint32_t parts);

}  // namespace bdsl::ops
