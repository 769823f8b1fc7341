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

namespace {

// One split-KV attention kernel under construction: its interface, its shared arrays and the
// per-workgroup values every phase uses. Each phase is one step between workgroup barriers.
class SplitKv {
 public:
  SplitKv(const std::string& name, const OpTarget& target, const AttentionDims& d, uint32_t context, uint32_t chunks,
          bool batch)
      : d_(d), context_(context), chunks_(chunks), wg_(attention_workgroup(target, d)), hd_(d.head_dim),
        words_(hd_ / 2), group_(d.group()), slices_(wg_ / words_), cap_(chunk_capacity(context, chunks, slices_)),
        k_(name, {wg_, 1, 1}),
        step_(k_.buffer<u32>("step", Access::Read)),
        q_(k_.buffer<f32>("q", Access::Read)),
        k_cache_(k_.buffer<u32>("k_cache", Access::Read)),
        v_cache_(k_.buffer<u32>("v_cache", Access::Read)),
        partials_(k_.buffer<u32>("partials", Access::ReadWrite)),
        counters_(k_.buffer<u32>("counters", Access::ReadWrite)),
        out_(k_.buffer<f32>("out", Access::Write)),
        n_(batch ? k_.push<u32>("n") : constant<u32>(1)),
        q_sh_(k_.shared<f32>("q_heads", group_ * hd_)),
        p_sh_(k_.shared<f32>("scores", group_ * cap_)),
        stats_sh_(k_.shared<f32>("stats", 2 * group_)),
        o_sh_(k_.shared<f32>("o_slices", slices_ * group_ * hd_)),
        w_sh_(k_.shared<f32>("chunk_weights", group_ * chunks)),
        l_sh_(k_.shared<f32>("chunk_sums", group_ * chunks)),
        last_sh_(k_.shared<u32>("is_last", 1)),
        lid_(k_.local_index()), kv_(k_.workgroup_id().x()), c_(k_.workgroup_id().y()), t_(k_.workgroup_id().z()) {}

  Kernel build() {
    if_(t_ < n_, [&] {  // the same for the whole workgroup: barriers below stay uniform
      // This token sees positions 0..last; chunk c holds [start, start + count).
      last_ = let("last", min(step_[kStepPos] + t_, constant<u32>(context_ - 1)));
      auto chunk_len = let("chunk_len", (last_ + chunks_) / chunks_);  // ceil((last + 1) / chunks)
      start_ = let("start", c_ * chunk_len);
      count_ = let("count", select(start_ <= last_, min(chunk_len, last_ + 1u - start_), 0u));
      q_row_ = let("q_row", t_ * d_.q_width() + kv_ * group_ * hd_);
      load_query();
      barrier();
      scores();
      barrier();
      softmax_statistics();
      barrier();
      weighted_values();
      barrier();
      write_partial();
      barrier(true);
      count_finished();
      barrier(true);
      combine();
    });
    return k_.build();
  }

 private:
  void load_query() {
    for_range(lid_, constant<u32>(group_ * hd_), wg_, [&](Expr<u32> i) { q_sh_[i] = q_[q_row_ + i]; }, "i");
  }

  // One invocation per position, reading its key row whole (q comes from shared memory as a
  // broadcast); no reductions, so the row loads of many positions are in flight at once.
  void scores() {
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
    for_range(lid_, count_, wg_, [&](Expr<u32> j) {
      auto row = let("row", (start_ + j) * d_.kv_words() + kv_ * words_);
      std::vector<Var<f32>> dots;
      for (uint32_t g = 0; g < group_; ++g) dots.push_back(k_.var<f32>("dot" + std::to_string(g), 0.0f));
      // The row's loads are written out (C++ loop), all issued before the first use.
      std::vector<Expr<vec2>> keys;
      for (uint32_t w = 0; w < words_; ++w) keys.push_back(let("key", unpack_half2x16(k_cache_[row + w])));
      for (uint32_t w = 0; w < words_; ++w)
        for (uint32_t g = 0; g < group_; ++g)
          dots[g] += q_sh_[g * hd_ + 2 * w] * keys[w].x() + q_sh_[g * hd_ + 2 * w + 1] * keys[w].y();
      for (uint32_t g = 0; g < group_; ++g) p_sh_[g * cap_ + j] = dots[g] * scale;
    }, "j");
  }

  // The chunk's max and sum of exp per query head, one subgroup per head; scores become
  // exp(s - max), and zero past the chunk (the V loop reads a little beyond it).
  void softmax_statistics() {
    auto lane = k_.subgroup_invocation();
    auto width = k_.subgroup_size();
    for_range(k_.subgroup_id(), constant<u32>(group_), k_.num_subgroups(), [&](Expr<u32> g) {
      auto m = k_.var<f32>("m", kLowest);
      for_range(lane, count_, width, [&](Expr<u32> j) { m = max(m, p_sh_[g * cap_ + j]); }, "j");
      auto chunk_max = let("chunk_max", subgroup_max(m));
      auto l = k_.var<f32>("l", 0.0f);
      for_range(lane, count_, width, [&](Expr<u32> j) {
        auto e = let("e", exp(p_sh_[g * cap_ + j] - chunk_max));
        p_sh_[g * cap_ + j] = e;
        l += e;
      }, "j");
      for_range(count_ + lane, constant<u32>(cap_), width, [&](Expr<u32> j) { p_sh_[g * cap_ + j] = 0.0f; }, "j");
      auto chunk_sum = let("chunk_sum", subgroup_add(l));
      if_(subgroup_elect(), [&] {
        stats_sh_[2u * g] = chunk_max;
        stats_sh_[2u * g + 1u] = chunk_sum;
      });
    }, "g");
  }

  // Unnormalised weighted V: invocation (slice, w) sums word w of the rows j = slice mod slices,
  // unrolled by kUnroll with clamped rows and zero weights past the chunk, so several rows' loads
  // are in flight at once instead of one latency per position.
  void weighted_values() {
    auto slice = let("slice", lid_ / words_);
    auto w = let("w", lid_ % words_);
    if_(slice < slices_, [&] {
      std::vector<Var<vec2>> acc;
      for (uint32_t g = 0; g < group_; ++g)
        acc.push_back(k_.var<vec2>("acc" + std::to_string(g), make_vec<f32>(0.0f, 0.0f)));
      for_range(slice, count_, slices_ * kUnroll, [&](Expr<u32> j0) {
        for (uint32_t u = 0; u < kUnroll; ++u) {
          auto j = j0 + u * slices_;
          auto row = min(start_ + j, last_) * d_.kv_words() + kv_ * words_;
          auto value = let("value", unpack_half2x16(v_cache_[row + w]));
          for (uint32_t g = 0; g < group_; ++g) acc[g] = Expr<vec2>(acc[g]) + value * p_sh_[g * cap_ + j];
        }
      }, "j");
      for (uint32_t g = 0; g < group_; ++g) {
        auto at = (slice * group_ + g) * hd_ + 2u * w;
        o_sh_[at] = acc[g].x();
        o_sh_[at + 1u] = acc[g].y();
      }
    });
  }

  // Partial (t, head, chunk): [max, sum, o[head_dim]] as f32 bits.
  Expr<u32> partial_at(Expr<u32> head, Expr<u32> chunk) const {
    return ((t_ * d_.n_heads + head) * chunks_ + chunk) * (hd_ + 2);
  }
  Expr<f32> read(Expr<u32> at) const { return bitcast<f32>(atomic_add(partials_[at], 0u)); }

  void write_partial() {
    for_range(lid_, constant<u32>(group_ * hd_), wg_, [&](Expr<u32> i) {
      auto o = k_.var<f32>("o", 0.0f);
      for (uint32_t s = 0; s < slices_; ++s) o += o_sh_[s * group_ * hd_ + i];
      auto at = partial_at(kv_ * group_ + i / hd_, c_);
      atomic_exchange(partials_[at + 2u + i % hd_], bitcast<u32>(Expr<f32>(o)));
      if_(i % hd_ < 2u, [&] {
        atomic_exchange(partials_[at + i % hd_], bitcast<u32>(Expr<f32>(stats_sh_[2u * (i / hd_) + i % hd_])));
      });
    }, "i");
  }

  void count_finished() {
    if_(lid_ == 0u, [&] {
      auto done_before = atomic_add(counters_[t_ * d_.n_kv_heads + kv_], 1u);
      last_sh_[0u] = select(done_before == chunks_ - 1, 1u, 0u);
    });
  }

  // The last workgroup of (t, kv) combines every chunk's partial: each (head, chunk) statistic
  // read by its own invocation, the heads' chunk weights exp(m_c - M) / L, then the outputs. The
  // barriers stay outside the branches (the validator cannot see that a flag in shared memory is
  // the same for the whole workgroup).
  void combine() {
    auto is_last = let("last_to_finish", last_sh_[0u] == 1u);
    if_(is_last, [&] {
      for_range(lid_, constant<u32>(group_ * chunks_), wg_, [&](Expr<u32> i) {
        auto at = partial_at(kv_ * group_ + i / chunks_, i % chunks_);
        w_sh_[i] = read(at);
        l_sh_[i] = read(at + 1u);
      }, "i");
    });
    barrier();
    if_(is_last, [&] { chunk_weights(); });
    barrier();
    if_(is_last, [&] {
      for_range(lid_, constant<u32>(group_ * hd_), wg_, [&](Expr<u32> i) { combine_output(i); }, "i");
      if_(lid_ == 0u, [&] { atomic_exchange(counters_[t_ * d_.n_kv_heads + kv_], 0u); });
    });
  }

  void chunk_weights() {
    const auto all = constant<u32>(chunks_);
    for_range(lid_, constant<u32>(group_), wg_, [&](Expr<u32> g) {
      auto big = k_.var<f32>("big", kLowest);
      for_range(constant<u32>(0), all, [&](Expr<u32> cc) { big = max(big, w_sh_[g * chunks_ + cc]); }, "cc");
      auto total = k_.var<f32>("total", 0.0f);
      for_range(constant<u32>(0), all, [&](Expr<u32> cc) {
        auto weight = let("weight", exp(w_sh_[g * chunks_ + cc] - big));
        w_sh_[g * chunks_ + cc] = weight;
        total += weight * l_sh_[g * chunks_ + cc];
      }, "cc");
      auto inv_total = let("inv_total", 1.0f / total);
      for_range(constant<u32>(0), all, [&](Expr<u32> cc) { w_sh_[g * chunks_ + cc] *= inv_total; }, "cc");
    }, "g");
  }

  void combine_output(Expr<u32> i) {
    auto g = i / hd_;
    auto o = k_.var<f32>("o", 0.0f);
    auto value_at = [&](Expr<u32> cc) { return partial_at(kv_ * group_ + g, cc) + 2u + i % hd_; };
    if (chunks_ <= kUnrolledChunks) {
      // Every chunk's value read at once (C++ loop), then summed: one atomic latency, not `chunks`.
      std::vector<Expr<f32>> parts;
      for (uint32_t cc = 0; cc < chunks_; ++cc) parts.push_back(let("part", read(value_at(constant<u32>(cc)))));
      for (uint32_t cc = 0; cc < chunks_; ++cc) o += w_sh_[g * chunks_ + cc] * parts[cc];
    } else {
      for_range(constant<u32>(0), constant<u32>(chunks_), [&](Expr<u32> cc) { o += w_sh_[g * chunks_ + cc] * read(value_at(cc)); }, "cc");
    }
    out_[q_row_ + i] = o;
  }

  const AttentionDims d_;
  const uint32_t context_, chunks_, wg_, hd_, words_, group_, slices_, cap_;
  KernelBuilder k_;
  Buffer<u32> step_;
  Buffer<f32> q_;
  Buffer<u32> k_cache_, v_cache_, partials_, counters_;
  Buffer<f32> out_;
  Expr<u32> n_;
  Shared<f32> q_sh_, p_sh_, stats_sh_, o_sh_, w_sh_, l_sh_;
  Shared<u32> last_sh_;
  Expr<u32> lid_, kv_, c_, t_;
  Expr<u32> last_ = constant_placeholder(), start_ = constant_placeholder(), count_ = constant_placeholder(),
            q_row_ = constant_placeholder();

  static Expr<u32> constant_placeholder() { return constant<u32>(0); }
};

}  // namespace

dsl::Kernel attention_split_kv(const std::string& name, const OpTarget& target, const AttentionDims& d,
                               uint32_t context, uint32_t chunks, bool batch) {
  d.check(name.c_str());
  if (shared_bytes(target, d, context, chunks) > target.max_shared_bytes)
    throw std::invalid_argument(name + ": " + std::to_string(chunks) + " chunks of a " + std::to_string(context) +
                                "-position context need more shared memory than the device has");
  return SplitKv(name, target, d, context, chunks, batch).build();
}

}  // namespace bdsl::ops
