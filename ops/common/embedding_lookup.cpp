#include "ops/common/embedding_lookup.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/dsl.h"
#include "ops/common/matrix_support.h"
#include "ops/common/parity_copy.h"
#include "ops/common/step_state.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

void for_embedding_part(const EmbeddingShape& s, Expr<u32> token, const std::function<void(uint32_t, Expr<u32>)>& body) {
  for (uint32_t p = 0; p < s.parts; ++p) {
    const uint32_t first = p * s.rows_per_part;
    Expr<boolean> in_part = constant<boolean>(true);
    if (p > 0) in_part = token >= first;
    if (p + 1 < s.parts) in_part = in_part && token < first + s.rows_per_part;
    if_(in_part, [&] { body(p, token - first); });
  }
}

NextEmbedding declare_next_embedding(KernelBuilder& k, const EmbeddingShape& shape) {
  std::vector<Buffer<u32>> table;
  for (uint32_t p = 0; p < shape.parts; ++p) table.push_back(k.buffer<u32>("embed_table" + std::to_string(p), Access::Read));
  return {std::move(table), k.buffer<f32>("x_next", Access::Write)};
}

void emit_embedding_row(KernelBuilder& k, uint32_t wg, const EmbeddingShape& shape, const std::vector<Buffer<u32>>& table,
                        Expr<u32> token, const Buffer<f32>& x) {
  const uint32_t pairs = shape.dim / 2;
  for_embedding_part(shape, token, [&](uint32_t p, Expr<u32> local) {
    auto base = let("pair_base", local * pairs);
    for (uint32_t j = 0; j * wg < pairs; ++j) {
      auto w = let("pair", k.local_index() + j * wg);
      auto write = [&] {
        auto two = unpack_half2x16(table[p][base + w]);
        x[w * 2u] = two.x();
        x[w * 2u + 1u] = two.y();
      };
      if ((j + 1) * wg > pairs)
        if_(w < pairs, write);
      else
        write();
    }
  });
}

namespace {

// x[row * dim + j] = f32(table[token][j]) for every j this invocation covers.
void gather_row(KernelBuilder& k, const EmbeddingShape& s, const std::vector<Buffer<u32>>& parts,
                const Buffer<f32>& x, Expr<u32> token, Expr<u32> row) {
  auto j = k.global_id().x();
  if_(j < s.dim, [&] {
    for_embedding_part(s, token, [&](uint32_t p, Expr<u32> local) {
      auto e = let("e", local * s.dim + j);  // half index inside this part
      auto pair = unpack_half2x16(parts[p][e >> 1u]);
      x[row * s.dim + j] = select((e & 1u) == 0u, pair.x(), pair.y());
    });
  });
}

std::vector<Buffer<u32>> table_parts(KernelBuilder& k, const EmbeddingShape& s) {
  std::vector<Buffer<u32>> parts;
  for (uint32_t p = 0; p < s.parts; ++p) parts.push_back(k.buffer<u32>("table_" + std::to_string(p), Access::Read));
  return parts;
}

}  // namespace

uint32_t embedding_workgroup(const OpTarget& target) { return std::min(256u, target.max_workgroup_invocations); }

dsl::Kernel embedding_lookup(const OpTarget& target, const EmbeddingShape& shape) {
  KernelBuilder k("embedding_lookup_f16", {embedding_workgroup(target), 1, 1});
  auto step = k.buffer<u32>("step", Access::Read);
  auto parts = table_parts(k, shape);
  auto x = k.buffer<f32>("x", Access::Write);
  gather_row(k, shape, parts, x, let("token", step[kStepToken]), constant<u32>(0));
  return k.build();
}

dsl::Kernel embedding_lookup_batch(const OpTarget& target, const EmbeddingShape& shape) {
  KernelBuilder k("embedding_lookup_f16_batch", {embedding_workgroup(target), 1, 1});
  auto tokens = k.buffer<u32>("tokens", Access::Read);
  auto parts = table_parts(k, shape);
  auto x = k.buffer<f32>("x", Access::Write);
  auto n = k.push<u32>("n");
  auto row = k.workgroup_id().y();
  if_(row < n, [&] { gather_row(k, shape, parts, x, let("token", tokens[row]), row); });
  return k.build();
}

dsl::Kernel embedding_lookup_fed(const OpTarget& target, const EmbeddingShape& shape, uint32_t vocab, uint32_t sources,
                                 std::optional<StagedInputs> staged) {
  if (sources == 0 || sources > kFedMaxSources)
    throw std::invalid_argument("embedding_lookup_fed: " + std::to_string(sources) + " sources; 1 to " +
                                std::to_string(kFedMaxSources) + " may feed it");
  if (vocab == 0 || vocab > uint64_t{shape.rows_per_part} * shape.parts)
    throw std::invalid_argument("embedding_lookup_fed: a vocabulary of " + std::to_string(vocab) + " in a table of " +
                                std::to_string(uint64_t{shape.rows_per_part} * shape.parts) + " rows");
  if (staged && (staged->words == 0 || staged->tokens_at >= staged->words))
    throw std::invalid_argument("embedding_lookup_fed: tokens at word " + std::to_string(staged->tokens_at) + " of a staged half of " +
                                std::to_string(staged->words));
  const uint32_t wg = embedding_workgroup(target);
  KernelBuilder k("embedding_lookup_f16_fed" + std::to_string(sources) + "_v" + std::to_string(vocab) +
                      (staged ? "_staged" + std::to_string(staged->words) + "_at" + std::to_string(staged->tokens_at) : ""),
                  {wg, 1, 1});
  std::optional<Buffer<u32>> tokens, counter, staging;
  if (staged) {
    counter = k.buffer<u32>("counter", Access::Read);
    staging = k.buffer<u32>("staging", Access::Read);
  } else {
    tokens = k.buffer<u32>("tokens", Access::Read);
  }
  std::vector<Buffer<u32>> fed;
  for (uint32_t s = 0; s < sources; ++s) fed.push_back(k.buffer<u32>("fed_" + std::to_string(s), Access::Read));
  auto parts = table_parts(k, shape);
  auto x = k.buffer<f32>("x", Access::Write);
  std::optional<Buffer<u32>> inputs;
  if (staged) inputs = k.buffer<u32>("inputs", Access::Write);
  auto n = k.push<u32>("n");
  auto row = k.workgroup_id().y();
  std::optional<Expr<u32>> half;
  if (staged) {
    // The whole half into `inputs`, spread over every invocation of the grid.
    auto groups = k.num_workgroups();
    auto first = let("first", (row * groups.x() + k.workgroup_id().x()) * wg + k.local_index());
    half = emit_copy_from_half(*staging, *inputs, Expr<u32>((*counter)[0u]), staged->words, first,
                               let("stride", groups.x() * groups.y() * wg));
  }
  if_(row < n, [&] {
    auto word = let("word", staged ? Expr<u32>((*staging)[*half + staged->tokens_at + row]) : Expr<u32>((*tokens)[row]));
    auto token = k.var<u32>("token", word);
    if_((word & kFedTokenFlag) != 0u, [&] {
      auto source = let("source", (word >> kFedSourceShift) & (kFedMaxSources - 1));
      auto index = let("index", word & (kFedMaxIndex - 1));
      Expr<u32> id = constant<u32>(0u);
      for (uint32_t s = 0; s < sources; ++s) {
        // Only the named source is read (the others' index may lie past their end).
        auto from = k.var<u32>("from", 0u);
        if_(source == s, [&] { from = Expr<u32>(fed[s][index]); });
        id = s == 0 ? Expr<u32>(from) : select(source == s, Expr<u32>(from), id);
      }
      auto fed_id = let("fed_id", id);
      token = select(fed_id < vocab, fed_id, constant<u32>(0u));
    });
    gather_row(k, shape, parts, x, let("token_id", Expr<u32>(token)), row);
  });
  return k.build();
}

Plan plan_embedding_lookup(const OpTarget& target, const EmbeddingShape& shape) {
  return {embedding_lookup(target, shape), fixed_grid({ceil_div(shape.dim, embedding_workgroup(target))})};
}

Plan plan_embedding_lookup_batch(const OpTarget& target, const EmbeddingShape& shape) {
  const uint32_t groups = ceil_div(shape.dim, embedding_workgroup(target));
  return {embedding_lookup_batch(target, shape), [groups](uint32_t tokens) { return rt::Grid{groups, tokens}; }};
}

Plan plan_embedding_lookup_fed(const OpTarget& target, const EmbeddingShape& shape, uint32_t vocab, uint32_t sources,
                               std::optional<StagedInputs> staged) {
  const uint32_t groups = ceil_div(shape.dim, embedding_workgroup(target));
  return {embedding_lookup_fed(target, shape, vocab, sources, staged), [groups](uint32_t tokens) { return rt::Grid{groups, tokens}; }};
}

}  // namespace bdsl::ops
