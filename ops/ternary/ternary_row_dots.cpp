// The I2_S row dot products of the ternary projections (ternary_row_dots.h): how a subgroup's
// lanes read a row's codes and pair them with q.
#include "ops/ternary/ternary_row_dots.h"

#include <stdexcept>

#include <algorithm>
#include <array>
#include <string>

namespace bdsl::ops::detail {
using namespace bdsl::dsl;

Expr<u32> masked_field(const Expr<u32>& w, uint32_t j) {
  return j == 0 ? (w >> 2u) & 0x30303030u : w & (0x03030303u << (6 - 2 * j));
}

namespace {

Expr<i32> tree_sum(std::vector<Expr<i32>> v) {
  if (v.empty()) throw std::logic_error("tree_sum of no terms");
  while (v.size() > 1) {
    std::vector<Expr<i32>> next;
    for (size_t i = 0; i + 1 < v.size(); i += 2) next.push_back(v[i] + v[i + 1]);
    if (v.size() % 2) next.push_back(v.back());
    v = std::move(next);
  }
  return v.front();
}

// sum over the four bytes of code * q, codes at bit `shift` of each byte of `w` (devices without
// an integer dot product).
Expr<i32> code_dot(const Expr<u32>& w, uint32_t shift, const Expr<u32>& q_word) {
  auto q = bitcast<i32>(q_word);
  std::vector<Expr<i32>> terms;
  for (int b = 0; b < 4; ++b)
    terms.push_back(cast<i32>(bitfield_extract(w, 8 * b + static_cast<int>(shift), 2)) * bitfield_extract(q, 8 * b, 8));
  return tree_sum(terms);
}


// A weight uvec4's four code fields against their q uvec4s (qv[j] pairs with field j): result j
// is the field's sum(code * q) times its scale (16, 16, 4, 1), exactly (|q| <= 128).
std::array<Expr<i32>, 4> masked_code_dots(const Expr<uvec4>& w, const std::vector<Expr<uvec4>>& qv) {
  std::array<Expr<i32>, 4> fields{constant<i32>(0), constant<i32>(0), constant<i32>(0), constant<i32>(0)};
  for (uint32_t j = 0; j < 4; ++j) {
    std::vector<Expr<i32>> terms;
    for (uint32_t m = 0; m < 4; ++m) terms.push_back(sdot4x8(masked_field(w.lane(m), j), qv[j].lane(m)));
    fields[j] = tree_sum(terms);
  }
  return fields;
}

// sum(code * q) from masked_code_dots' per-field sums, accumulated: exact shifts (each sum is a
// multiple of its scale: 16 for fields 0 and 1, 4 for field 2, 1 for field 3).
Expr<i32> unscale_fields(const std::array<Expr<i32>, 4>& f) { return f[3] + (f[2] >> 2) + ((f[1] + f[0]) >> 4); }
Expr<i32> unscale_fields(const std::vector<Var<i32>>& f) {
  return unscale_fields(std::array<Expr<i32>, 4>{Expr<i32>(f[0]), Expr<i32>(f[1]), Expr<i32>(f[2]), Expr<i32>(f[3])});
}

}  // namespace

uint32_t chunk_unroll(uint32_t chunks, uint32_t target_subgroup, size_t tokens) {
  return tokens > 1 ? 1u : std::max(1u, (chunks + target_subgroup - 1) / std::max(1u, target_subgroup));
}

Prefetch declare_prefetch(KernelBuilder& k, uint32_t unroll, size_t weight_rows, const std::string& tag, bool words) {
  Prefetch p;
  for (uint32_t u = 0; u < unroll; ++u) {
    const std::string n = "pre" + tag + std::to_string(u) + "_";
    if (words) {
      p.ww.emplace_back();
      for (size_t i = 0; i < weight_rows; ++i) p.ww.back().push_back(k.var<u32>(n + std::to_string(i), 0u));
      continue;
    }
    p.wv.emplace_back();
    for (size_t i = 0; i < weight_rows; ++i) p.wv.back().push_back(k.var<uvec4>(n + std::to_string(i), make_vec<u32>(0u, 0u, 0u, 0u)));
  }
  return p;
}

// units: a row's chunks or words.
void fill_prefetch(KernelBuilder& k, Prefetch& p, const std::vector<WeightBuffer>& w, const std::vector<Expr<u32>>& row_base,
                   uint32_t units) {
  auto sg = k.subgroup_size();
  for (size_t u = 0; u < p.ww.size(); ++u)  // word units: every lane's words are in the row
    for (size_t i = 0; i < w.size(); ++i)
      p.ww[u][i] = Expr<u32>(std::get<Buffer<u32>>(w[i])[row_base[i] + k.subgroup_invocation() + sg * static_cast<uint32_t>(u)]);
  for (size_t u = 0; u < p.wv.size(); ++u) {
    auto cc = min(k.subgroup_invocation() + sg * static_cast<uint32_t>(u), constant<u32>(units - 1));
    for (size_t i = 0; i < w.size(); ++i) p.wv[u][i] = Expr<uvec4>(std::get<Buffer<uvec4>>(w[i])[row_base[i] + cc]);
  }
}

Expr<u32> swizzled_q_word(Expr<u32> i) {
  return (i & ~31u) | ((i + ((i >> 5u) & 3u) * 8u) & 31u);
}

std::vector<std::vector<Expr<i32>>> emit_row_word_dots(KernelBuilder& k, const std::vector<WeightBuffer>& w,
                                                       const std::vector<Expr<u32>>& row_base, uint32_t words,
                                                       const Shared<u32>& q, const OpTarget& target, const Prefetch* pre) {
  const uint32_t unroll = words / target.subgroup_size;
  std::vector<std::vector<Var<i32>>> acc(w.size());  // [t][field]
  for (size_t t = 0; t < w.size(); ++t)
    for (uint32_t f = 0; f < 4; ++f) acc[t].push_back(k.var<i32>("dot" + std::to_string(t) + "_" + std::to_string(f), 0));
  auto lane = k.subgroup_invocation();
  for (uint32_t u = 0; u < unroll; ++u) {
    auto word = let("word", lane + u * target.subgroup_size);
    auto block = word >> 3u;
    auto rotated = let("q_rot", (word & 7u) + (block & 3u) * 8u);
    auto base = let("q_base", block << 5u);
    std::vector<Expr<u32>> qv;
    for (uint32_t j = 0; j < 4; ++j) qv.push_back(let("qw" + std::to_string(j), Expr<u32>(q[base + ((rotated + 8u * j) & 31u)])));
    for (size_t t = 0; t < w.size(); ++t) {
      auto wv = pre ? Expr<u32>(pre->ww[u][t]) : let("ww", Expr<u32>(std::get<Buffer<u32>>(w[t])[row_base[t] + word]));
      for (uint32_t j = 0; j < 4; ++j) acc[t][j] += sdot4x8(masked_field(wv, j), qv[j]);
    }
  }
  std::vector<std::vector<Expr<i32>>> sums(w.size());
  for (size_t t = 0; t < w.size(); ++t) sums[t].push_back(subgroup_add(unscale_fields(acc[t])));
  return sums;
}

std::vector<std::vector<Expr<i32>>> emit_row_dots(KernelBuilder& k, const std::vector<WeightBuffer>& w,
                                                  const std::vector<Expr<u32>>& row_base, uint32_t chunks,
                                                  const std::vector<TokenSlot>& tokens, const QuadLoader& q,
                                                  bool packed, const OpTarget& target,
                                                  const Prefetch* pre, std::optional<uint32_t> zero_quad) {
  const uint32_t unroll = chunk_unroll(chunks, target.subgroup_size, tokens.size());
  // Packed: masked_code_dots. Where the lane's chunks are one written-out pass (decode on a
  // device of the target's subgroup size), one accumulator per field, scaled back once at the
  // end; where they are a loop, each chunk's fields are scaled back at once into one accumulator
  // (OpTarget::field_accumulators_in_loops: an NVIDIA compiler bug, docs/driver-notes.md).
  const bool per_field = packed && ((pre && target.subgroup_size_fixed) || target.field_accumulators_in_loops);
  const uint32_t fields = per_field ? 4 : 1;
  std::vector<std::vector<std::vector<Var<i32>>>> acc(w.size());  // [t][s][field]
  for (size_t t = 0; t < w.size(); ++t)
    for (size_t s = 0; s < tokens.size(); ++s) {
      acc[t].emplace_back();
      for (uint32_t f = 0; f < fields; ++f)
        acc[t].back().push_back(k.var<i32>("dot" + std::to_string(t) + "_" + std::to_string(s) + "_" + std::to_string(f), 0));
    }
  auto sg = k.subgroup_size();
  // `lanes_known`: c0 is the lane and the device runs the target's subgroup size, so a chunk
  // slot is known in range where the whole subgroup's is. A slot that may pass the end reads
  // chunk `chunks - 1` and counts 0: with a zero_quad, by reading q from there (zeros), with no
  // select per row.
  auto pass = [&](Expr<u32> c0, const Prefetch* loaded, bool lanes_known) {
    std::vector<std::optional<Expr<boolean>>> valid;
    std::vector<Expr<u32>> q_at;
    std::vector<std::vector<Expr<uvec4>>> wv(unroll);
    for (uint32_t u = 0; u < unroll; ++u) {
      auto c = u == 0 ? c0 : let("c" + std::to_string(u), c0 + sg * u);
      const bool in_range = lanes_known && (u + 1) * target.subgroup_size <= chunks;
      auto cc = in_range ? c : let("c_read", min(c, constant<u32>(chunks - 1)));
      // uvec4 c is words 4h..4h+3 of block c/2 (h = c % 2); its shift-j codes pair with the q
      // words 32 * block + 8j + 4h .., the uvec4 8 * block + 2j + h of q.
      Expr<u32> at = ((cc >> 1u) << 3u) + (cc & 1u);
      if (in_range) {
        valid.push_back(std::nullopt);
      } else if (zero_quad) {
        at = select(c < chunks, at, constant<u32>(*zero_quad));
        valid.push_back(std::nullopt);
      } else {
        valid.push_back(let("c_valid", c < chunks));
      }
      q_at.push_back(let("q_at", at));
      for (size_t t = 0; t < w.size(); ++t)
        wv[u].push_back(loaded ? Expr<uvec4>(loaded->wv[u][t])
                               : let("wv" + std::to_string(t), Expr<uvec4>(std::get<Buffer<uvec4>>(w[t])[row_base[t] + cc])));
    }
    for (size_t s = 0; s < tokens.size(); ++s) {
      auto body = [&] {
        for (uint32_t u = 0; u < unroll; ++u) {
          // A chunk slot's contribution: 0 where it may pass the row's end and does.
          auto counted = [&](Expr<i32> v) { return valid[u] ? select(*valid[u], v, constant<i32>(0)) : v; };
          std::vector<Expr<uvec4>> qv;
          for (uint32_t j = 0; j < 4; ++j) qv.push_back(let("qv" + std::to_string(j), q(tokens[s].token, q_at[u] + 2u * j)));
          for (size_t t = 0; t < w.size(); ++t) {
            if (packed && !per_field) {
              auto dot = unscale_fields(masked_code_dots(wv[u][t], qv));
              acc[t][s][0] += counted(dot);
              continue;
            }
            if (packed) {
              const auto fields_now = masked_code_dots(wv[u][t], qv);
              for (uint32_t j = 0; j < 4; ++j) acc[t][s][j] += counted(fields_now[j]);
              continue;
            }
            std::vector<Expr<i32>> terms;
            for (uint32_t j = 0; j < 4; ++j)
              for (uint32_t m = 0; m < 4; ++m) terms.push_back(code_dot(wv[u][t].lane(m), 6 - 2 * j, qv[j].lane(m)));
            acc[t][s][0] += counted(tree_sum(terms));
          }
        }
      };
      if (tokens[s].valid)
        if_(*tokens[s].valid, body);
      else
        body();
    }
  };
  if (pre) {
    pass(k.subgroup_invocation(), pre, target.subgroup_size_fixed);
    // Only where the device runs a smaller subgroup than the target's.
    if (!target.subgroup_size_fixed)
      for_range(k.subgroup_invocation() + sg * unroll, chunks, sg * unroll, [&](Expr<u32> c0) { pass(c0, nullptr, false); }, "chunk");
  } else {
    for_range(k.subgroup_invocation(), chunks, sg * unroll, [&](Expr<u32> c0) { pass(c0, nullptr, false); }, "chunk");
  }
  std::vector<std::vector<Expr<i32>>> sums(w.size());
  for (size_t t = 0; t < w.size(); ++t)
    for (size_t s = 0; s < acc[t].size(); ++s)
      sums[t].push_back(subgroup_add(fields == 1 ? Expr<i32>(acc[t][s][0]) : unscale_fields(acc[t][s])));
  return sums;
}

}  // namespace bdsl::ops::detail
