#include "ops/attention_split_kv.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "dsl/dsl.h"
#include "ops/step_state.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr float kLowest = -3.402823466e38f;

constexpr uint32_t kUnroll = 8;           // V rows in flight per invocation
constexpr uint32_t kUnrolledChunks = 64;  // up to this many chunks, the combine's reads are written out

// Scores kept per head: the chunk's longest length, padded for the unrolled V loop.
uint32_t chunk_capacity(uint32_t context, uint32_t chunks, uint32_t slices) {
  return (context + chunks - 1) / chunks + slices * kUnroll;
}

uint32_t shared_bytes(const OpTarget& target, const AttentionDims& d, uint32_t context, uint32_t chunks) {
  const uint32_t slices = attention_workgroup(target, d) / (d.head_dim / 2);
  const uint32_t floats = d.group() * d.head_dim * (1 + slices) + d.group() * chunk_capacity(context, chunks, slices) +
                          2 * d.group() + 2 * d.group() * chunks;
  return 4 * floats + 4;
}

}  // namespace

uint32_t attention_workgroup(const OpTarget& target, const AttentionDims& dims) {
  // Whole subgroups (a partial one would drop lanes from the score reductions) and whole rows of
  // V words (the V step gives each invocation one word of a row).
  const uint32_t unit = std::lcm(dims.head_dim / 2, target.subgroup_size);
  return std::max(unit, std::min(256u, target.max_workgroup_invocations) / unit * unit);
}

uint32_t attention_chunks(const OpTarget& target, const AttentionDims& dims, uint32_t context) {
  uint32_t chunks = std::max(1u, std::min(32u, context / 64));
  while (chunks < context && shared_bytes(target, dims, context, chunks) > target.max_shared_bytes) chunks *= 2;
  return chunks;
}

uint64_t attention_partials_bytes(const AttentionDims& d, uint32_t chunks, uint32_t tokens) {
  return 4ull * tokens * d.n_heads * chunks * (d.head_dim + 2);
}
uint64_t attention_counters_bytes(const AttentionDims& d, uint32_t tokens) { return 4ull * tokens * d.n_kv_heads; }

dsl::Kernel attention_split_kv(const std::string& name, const OpTarget& target, const AttentionDims& d,
                               uint32_t context, uint32_t chunks, bool batch) {
  d.check(name.c_str());
  const uint32_t wg = attention_workgroup(target, d);
  const uint32_t hd = d.head_dim, words = hd / 2, group = d.group(), slices = wg / words;
  const uint32_t cap = chunk_capacity(context, chunks, slices);
  if (shared_bytes(target, d, context, chunks) > target.max_shared_bytes)
    throw std::invalid_argument(name + ": " + std::to_string(chunks) + " chunks of a " + std::to_string(context) +
                                "-position context need more shared memory than the device has");
  KernelBuilder k(name, {wg, 1, 1});
  auto step = k.buffer<u32>("step", Access::Read);
  auto q = k.buffer<f32>("q", Access::Read);
  auto k_cache = k.buffer<u32>("k_cache", Access::Read);
  auto v_cache = k.buffer<u32>("v_cache", Access::Read);
  auto partials = k.buffer<u32>("partials", Access::ReadWrite);
  auto counters = k.buffer<u32>("counters", Access::ReadWrite);
  auto out = k.buffer<f32>("out", Access::Write);
  Expr<u32> n = batch ? k.push<u32>("n") : constant<u32>(1);
  auto q_sh = k.shared<f32>("q_scaled", group * hd);
  auto p_sh = k.shared<f32>("scores", group * cap);
  auto stats_sh = k.shared<f32>("stats", 2 * group);
  auto o_sh = k.shared<f32>("o_slices", slices * group * hd);
  auto w_sh = k.shared<f32>("chunk_weights", group * chunks);
  auto l_sh = k.shared<f32>("chunk_sums", group * chunks);
  auto last_sh = k.shared<u32>("is_last", 1);

  auto lid = k.local_index();
  auto kv = k.workgroup_id().x();
  auto c = k.workgroup_id().y();
  auto t = k.workgroup_id().z();
  auto lane = k.subgroup_invocation();
  auto sg = k.subgroup_id();
  auto n_sg = k.num_subgroups();

  if_(t < n, [&] {  // the same for the whole workgroup: barriers below stay uniform
    // This token sees positions 0..last; chunk c holds [start, start + count).
    auto last = let("last", min(step[kStepPos] + t, constant<u32>(context - 1)));
    auto chunk_len = let("chunk_len", (last + chunks) / chunks);  // ceil((last + 1) / chunks)
    auto start = let("start", c * chunk_len);
    auto count = let("count", select(start <= last, min(chunk_len, last + 1u - start), 0u));
    auto q_row = let("q_row", t * d.q_width() + kv * group * hd);
    auto kv_row = kv * words;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

    for_range(lid, constant<u32>(group * hd), wg, [&](Expr<u32> i) { q_sh[i] = q[q_row + i]; }, "i");
    barrier();

    // Scores: one invocation per position, reading its key row whole (q comes from shared memory
    // as a broadcast); no reductions, so the row loads of many positions are in flight at once.
    for_range(lid, count, wg, [&](Expr<u32> j) {
      auto row = let("row", (start + j) * d.kv_words() + kv_row);
      std::vector<Var<f32>> dots;
      for (uint32_t g = 0; g < group; ++g) dots.push_back(k.var<f32>("dot" + std::to_string(g), 0.0f));
      // The row's loads are written out (C++ loop), all issued before the first use.
      std::vector<Expr<vec2>> keys;
      for (uint32_t w = 0; w < words; ++w) keys.push_back(let("key", unpack_half2x16(k_cache[row + w])));
      for (uint32_t w = 0; w < words; ++w)
        for (uint32_t g = 0; g < group; ++g)
          dots[g] += q_sh[g * hd + 2 * w] * keys[w].x() + q_sh[g * hd + 2 * w + 1] * keys[w].y();
      for (uint32_t g = 0; g < group; ++g) p_sh[g * cap + j] = dots[g] * scale;
    }, "j");
    barrier();

    // Softmax statistics of the chunk, one subgroup per query head; scores become exp(s - max).
    for_range(sg, constant<u32>(group), n_sg, [&](Expr<u32> g) {
      auto m = k.var<f32>("m", kLowest);
      for_range(lane, count, k.subgroup_size(), [&](Expr<u32> j) { m = max(m, p_sh[g * cap + j]); }, "j");
      auto chunk_max = let("chunk_max", subgroup_max(m));
      auto l = k.var<f32>("l", 0.0f);
      for_range(lane, count, k.subgroup_size(), [&](Expr<u32> j) {
        auto e = let("e", exp(p_sh[g * cap + j] - chunk_max));
        p_sh[g * cap + j] = e;
        l += e;
      }, "j");
      for_range(count + lane, constant<u32>(cap), k.subgroup_size(), [&](Expr<u32> j) { p_sh[g * cap + j] = 0.0f; }, "j");
      auto chunk_sum = let("chunk_sum", subgroup_add(l));
      if_(subgroup_elect(), [&] {
        stats_sh[2u * g] = chunk_max;
        stats_sh[2u * g + 1u] = chunk_sum;
      });
    }, "g");
    barrier();

    // Unnormalised weighted V: invocation (slice, w) sums the positions j = slice mod slices.
    auto slice = let("slice", lid / words);
    auto w = let("w", lid % words);
    if_(slice < slices, [&] {
      std::vector<Var<vec2>> acc;
      for (uint32_t g = 0; g < group; ++g)
        acc.push_back(k.var<vec2>("acc" + std::to_string(g), make_vec<f32>(0.0f, 0.0f)));
      // Unrolled by kUnroll with clamped rows and zero weights past the chunk, so several rows'
      // loads are in flight at once instead of one latency per position.
      for_range(slice, count, slices * kUnroll, [&](Expr<u32> j0) {
        for (uint32_t u = 0; u < kUnroll; ++u) {
          auto j = j0 + u * slices;
          auto row = min(start + j, last) * d.kv_words() + kv_row;
          auto value = let("value", unpack_half2x16(v_cache[row + w]));
          for (uint32_t g = 0; g < group; ++g) acc[g] = Expr<vec2>(acc[g]) + value * p_sh[g * cap + j];
        }
      }, "j");
      for (uint32_t g = 0; g < group; ++g) {
        auto at = (slice * group + g) * hd + 2u * w;
        o_sh[at] = acc[g].x();
        o_sh[at + 1u] = acc[g].y();
      }
    });
    barrier();

    // This chunk's partial per head: [max, sum, o[head_dim]].
    auto partial_at = [&](Expr<u32> head, Expr<u32> chunk) {
      return ((t * d.n_heads + head) * chunks + chunk) * (hd + 2);
    };
    for_range(lid, constant<u32>(group * hd), wg, [&](Expr<u32> i) {
      auto o = k.var<f32>("o", 0.0f);
      for (uint32_t s = 0; s < slices; ++s) o += o_sh[s * group * hd + i];
      auto g = i / hd;
      atomic_exchange(partials[partial_at(kv * group + g, c) + 2u + i % hd], bitcast<u32>(Expr<f32>(o)));
      if_(i % hd < 2u, [&] {
        atomic_exchange(partials[partial_at(kv * group + g, c) + i % hd], bitcast<u32>(Expr<f32>(stats_sh[2u * g + i % hd])));
      });
    }, "i");
    barrier(true);
    auto counter = t * d.n_kv_heads + kv;
    if_(lid == 0u, [&] {
      auto done_before = atomic_add(counters[counter], 1u);
      last_sh[0u] = select(done_before == chunks - 1, 1u, 0u);
    });
    barrier(true);

    // The last workgroup of (t, kv) combines every chunk's partial: first each head's chunk
    // weights exp(m_c - M) / L, then the outputs. The barrier between stays outside the branch
    // (the validator cannot see that a shared flag is the same for the whole workgroup).
    auto is_last = let("last_to_finish", last_sh[0u] == 1u);
    auto read = [&](Expr<u32> at) { return bitcast<f32>(atomic_add(partials[at], 0u)); };
    // Every (head, chunk) statistic read by its own invocation, all in flight together.
    if_(is_last, [&] {
      for_range(lid, constant<u32>(group * chunks), wg, [&](Expr<u32> i) {
        auto at = partial_at(kv * group + i / chunks, i % chunks);
        w_sh[i] = read(at);
        l_sh[i] = read(at + 1u);
      }, "i");
    });
    barrier();
    if_(is_last, [&] {
      for_range(lid, constant<u32>(group), wg, [&](Expr<u32> g) {
        auto big = k.var<f32>("big", kLowest);
        for_range(constant<u32>(0), constant<u32>(chunks), [&](Expr<u32> cc) { big = max(big, w_sh[g * chunks + cc]); }, "cc");
        auto total = k.var<f32>("total", 0.0f);
        for_range(constant<u32>(0), constant<u32>(chunks), [&](Expr<u32> cc) {
          auto weight = let("weight", exp(w_sh[g * chunks + cc] - big));
          w_sh[g * chunks + cc] = weight;
          total += weight * l_sh[g * chunks + cc];
        }, "cc");
        auto inv_total = let("inv_total", 1.0f / total);
        for_range(constant<u32>(0), constant<u32>(chunks), [&](Expr<u32> cc) { w_sh[g * chunks + cc] *= inv_total; }, "cc");
      }, "g");
    });
    barrier();
    if_(is_last, [&] {
      for_range(lid, constant<u32>(group * hd), wg, [&](Expr<u32> i) {
        auto g = i / hd;
        auto o = k.var<f32>("o", 0.0f);
        auto value_at = [&](Expr<u32> cc) { return partial_at(kv * group + g, cc) + 2u + i % hd; };
        if (chunks <= kUnrolledChunks) {
          // Every chunk's value read at once (C++ loop), then summed: one atomic latency, not `chunks`.
          std::vector<Expr<f32>> parts;
          for (uint32_t cc = 0; cc < chunks; ++cc) parts.push_back(let("part", read(value_at(constant<u32>(cc)))));
          for (uint32_t cc = 0; cc < chunks; ++cc) o += w_sh[g * chunks + cc] * parts[cc];
        } else {
          for_range(constant<u32>(0), constant<u32>(chunks), [&](Expr<u32> cc) { o += w_sh[g * chunks + cc] * read(value_at(cc)); }, "cc");
        }
        out[q_row + i] = o;
      }, "i");
      if_(lid == 0u, [&] { atomic_exchange(counters[counter], 0u); });
    });
  });
  return k.build();
}

}  // namespace bdsl::ops
