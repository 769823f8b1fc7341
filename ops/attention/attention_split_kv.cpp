#include "ops/attention/attention_split_kv.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "dsl/dsl.h"
#include "ops/attention/attention_merge.h"
#include "ops/common/handoff.h"
#include "ops/common/step_state.h"
#include "ops/ternary/ternary_matvec.h"
#include "ops/ternary/ternary_projection.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr float kLowest = detail::kAttentionLowest;
using detail::MergeState;
using detail::merge_round;
constexpr uint32_t kMaxWorkgroup = 256;

// How one workgroup lays its invocations over K/V rows (see the header): `per` loads of `vw`
// words per lane and row, `lanes` lanes per row, `rows` row groups.
struct Layout {
  uint32_t vw, nvec, lanes, per, subgroups, wg, rows;
};

// The same for any head_split (its workgroups hold fewer heads in the same layout), so a
// consumer of the partials finds the same pass whatever the split.
Layout layout(const OpTarget& target, const AttentionDims& d, uint32_t max_lanes = 0) {
  Layout l{};
  const uint32_t words = d.head_dim / 2;
  l.vw = words % 4 == 0 ? 4 : 2;
  l.nvec = words / l.vw;
  const uint32_t sg = std::max(1u, target.subgroup_size);
  l.lanes = std::min(std::bit_ceil(l.nvec), max_lanes ? std::min(std::bit_floor(max_lanes), sg) : sg);
  l.per = (l.nvec + l.lanes - 1) / l.lanes;
  // One merged partial per subgroup in shared memory: as many subgroups as fit, up to 256 lanes.
  const uint32_t per_subgroup = 4 * d.group() * (d.head_dim + 4);
  const uint32_t reserved = 64;
  const uint32_t fit = target.max_shared_bytes > reserved ? (target.max_shared_bytes - reserved) / per_subgroup : 0;
  l.subgroups = std::max(1u, std::min({std::max(1u, std::min(kMaxWorkgroup, target.max_workgroup_invocations) / sg), fit}));
  l.wg = l.subgroups * sg;
  l.rows = l.wg / l.lanes;
  return l;
}

uint32_t shared_bytes(const AttentionDims& d, const Layout& l, uint32_t heads) {
  return 4 * l.subgroups * heads * (d.head_dim + 4) + 4;
}

}  // namespace

uint32_t attention_workgroup(const OpTarget& target, const AttentionDims& dims) { return layout(target, dims).wg; }

uint32_t attention_head_split(const AttentionDims& dims, const SplitKvTuning& tuning) {
  const uint32_t split = std::max(1u, tuning.head_split);
  if (dims.group() % split != 0)
    throw std::invalid_argument("attention: head_split " + std::to_string(split) + " does not divide the " +
                                std::to_string(dims.group()) + " query heads of a KV head");
  return split;
}

uint32_t attention_chunks_per_workgroup(uint32_t chunks, const SplitKvTuning& tuning) {
  return std::clamp(tuning.chunks_per_workgroup, 1u, std::max(chunks, 1u));
}

uint32_t attention_chunk_workgroups(uint32_t chunks, const SplitKvTuning& tuning) {
  const uint32_t per = attention_chunks_per_workgroup(chunks, tuning);
  return (chunks + per - 1) / per;
}

uint32_t attention_pass(const OpTarget& target, const AttentionDims& dims, const SplitKvTuning& tuning) {
  return layout(target, dims, tuning.max_lanes_per_row).rows * std::max(1u, tuning.positions_per_pass);
}

namespace {

// Chunks of whole passes for last + 1 positions: ceil((last + 1) / pass), at most `chunks`.
Expr<u32> whole_pass_chunks(Expr<u32> last, uint32_t pass, uint32_t chunks) {
  return let("wanted", min(last / pass + 1u, constant<u32>(chunks)));
}

// `wanted` equal chunks over last + 1 positions: their length ceil((last + 1) / wanted) and how
// many of them are non-empty.
struct ChunkSplit {
  Expr<u32> length, active;
};
ChunkSplit split_chunks(Expr<u32> last, Expr<u32> wanted) {
  auto length = let("chunk_len", last / wanted + 1u);
  return {length, let("active", last / length + 1u)};
}

// split_chunks(last, wanted).active is `wanted` itself where chunks are at least `unit` long and
// unit >= chunks: with last = q * wanted + r, the chunk length is q + 1 and last / (q + 1) =
// wanted - (wanted - r) / (q + 1) lies in [wanted - 1, wanted) once q >= wanted - 1, which
// last >= unit * (wanted - 1) >= wanted * (wanted - 1) gives. That saves two divisions by run-time
// values (a few dozen instructions each, in every invocation) where the split is known to be whole.
Expr<u32> active_chunks(Expr<u32> last, Expr<u32> wanted, uint32_t unit, uint32_t chunks) {
  return unit >= chunks ? wanted : split_chunks(last, wanted).active;
}

}  // namespace

Expr<u32> attention_active_chunks(Expr<u32> last, uint32_t pass, uint32_t chunks) {
  return active_chunks(last, whole_pass_chunks(last, pass, chunks), pass, chunks);
}

uint32_t attention_chunks(const OpTarget&, const AttentionDims&, uint32_t context) {
  return std::max(1u, std::min(16u, context / 64));
}

Expr<u32> partials_block(const AttentionDims& d, uint32_t chunks, Expr<u32> token, Expr<u32> kv, Expr<u32> chunk) {
  return ((token * d.n_kv_heads + kv) * chunks + chunk) * (d.group() * (d.head_dim / 2 + 1));
}

uint64_t attention_partials_bytes(const AttentionDims& d, uint32_t chunks, uint32_t tokens) {
  return 4ull * tokens * d.n_heads * chunks * (d.head_dim + 2);
}
uint64_t attention_counters_bytes(const AttentionDims& d, uint32_t tokens) { return 4ull * tokens * d.n_kv_heads; }

namespace {

// One split-KV attention kernel under construction. V is the vector one K/V load reads (uvec4:
// 8 halves, or uvec2 where head_dim is not a multiple of 8).
template <class V>
class SplitKv {
  static constexpr uint32_t kVw = lanes_v<V>;

 public:
  SplitKv(const std::string& name, const OpTarget& target, const AttentionDims& d, uint32_t context, uint32_t chunks,
          bool batch, const SplitKvTuning& tuning, bool sequences, bool one_sequence)
      : name_(name), target_(target), sequences_(sequences), d_(d),
        split_(attention_head_split(d, tuning)), l_(layout(target, d, tuning.max_lanes_per_row)), context_(context),
        chunks_(chunks), hd_(d.head_dim), group_(d.group()), hg_(group_ / split_),
        unroll_(std::max(1u, tuning.positions_per_pass)), combine_unroll_(std::max(1u, tuning.combine_unroll)),
        defer_(batch && !sequences ? 0u : tuning.defer_combine), whole_pass_(defer_ > 0 || tuning.whole_pass_chunks),
        per_workgroup_(attention_chunks_per_workgroup(chunks, tuning)),
        k_(name + handoff_suffix(target), {l_.wg, 1, 1}),
        step_(k_.buffer<u32>(sequences ? "sequences" : "step", Access::Read)),
        q_(k_.buffer<vec4>("q", Access::Read)),
        k_cache_(k_.buffer<V>("k_cache", Access::Read)),
        v_cache_(k_.buffer<V>("v_cache", Access::Read)),
        partials_(partials_buffer<vec2>(k_, target, "partials", Access::ReadWrite)),
        counters_(k_.buffer<u32>("counters", Access::ReadWrite)),
        out_(k_.buffer<vec2>("out", Access::Write)),
        n_(batch && !one_sequence ? k_.push<u32>("n") : constant<u32>(1)),
        o_sh_(k_.shared<f32>("o_subgroups", l_.subgroups * hg_ * hd_)),
        stats_sh_(k_.shared<f32>("stats_subgroups", l_.subgroups * hg_ * 2)),
        last_sh_(k_.shared<u32>("is_last", 1)),
        lid_(k_.local_index()), kv_(split_ == 1 ? k_.workgroup_id().x() : k_.workgroup_id().x() / split_),
        part_(split_ == 1 ? zero() : k_.workgroup_id().x() % split_), c_(k_.workgroup_id().y()),
        // One token (decode, or a batch's kernel for one sequence): token 0 a constant, which the
        // compiler turns into faster code than the grid's z (bench/RESULTS.md run 25).
        t_(one_sequence || !batch ? zero() : k_.workgroup_id().z()) {
    if (kVw != l_.vw) throw std::logic_error("attention_split_kv: vector width mismatch");
    if (one_sequence) k_.push<u32>("n");  // the batch's push constant, unread: one sequence, token 0
  }

  Kernel build() {
    attend();
    return k_.build();
  }

 private:
  void attend() {
    if_(t_ < n_, [&] {  // uniform over the workgroup: the barriers below stay uniform
      // The query first: its loads do not wait for the step state's.
      group_row_ = let("group_row", t_ * d_.q_width() + kv_ * group_ * hd_);
      q_row_ = split_ == 1 ? group_row_ : let("q_row", group_row_ + part_ * (hg_ * hd_));
      sg_lane_ = k_.subgroup_invocation();
      lane_ = let("lane", sg_lane_ % l_.lanes);
      row_group_ = let("row_group", k_.subgroup_id() * (target_subgroup() / l_.lanes) + sg_lane_ / l_.lanes);
      load_query();
      // This token sees n = last + 1 positions. Up to one pass of the workgroup they are one chunk
      // (no combine at all); past that, chunks of at least half a pass: twice the workgroups
      // reading half as much each, for the same one-round combine (faster: bench/RESULTS.md, "Behind the code").
      // `active` chunks, each non-empty, chunk c
      // holding [start, start + count).
      if (!sequences_) return scan_chunks(let("last", min(step_[kStepPos] + t_, constant<u32>(context_ - 1))));
      row_base_ = let("row_base", step_[t_ * kSequenceWords + kSequenceFirstRow]);
      scan_chunks(let("last", min(step_[t_ * kSequenceWords + kSequencePos], constant<u32>(context_ - 1))));
    });
  }

  void scan_chunks(Expr<u32> last) {
    last_ = last;
    const uint32_t pass = l_.rows * unroll_, half_pass = std::max(1u, pass / 2);
    // A deferred combine's consumer finds `active` again with attention_active_chunks.
    auto wanted = whole_pass_ ? whole_pass_chunks(last_, pass, chunks_)
                              : let("wanted", select(last_ < pass, 1u, min(last_ / half_pass + 1u, constant<u32>(chunks_))));
    auto chunk_len = split_chunks(last_, wanted).length;
    active_ = active_chunks(last_, wanted, whole_pass_ ? pass : half_pass, chunks_);
    auto chunk = [&] {
      if_(c_ < active_, [&] {
        start_ = let("start", c_ * chunk_len);
        count_ = let("count", min(chunk_len, last_ + 1u - start_));
        scan_positions();
        merge_in_subgroup();
        barrier();
        merge_subgroups_and_finish();
      });
    };
    if (per_workgroup_ == 1) return chunk();
    // This workgroup's chunks one after the other (uniform: the barriers stay uniform), each
    // starting once the previous one is done with the shared memory.
    auto first_chunk = let("first_chunk", k_.workgroup_id().y() * per_workgroup_);
    for_range(0u, per_workgroup_, [&](Expr<u32> j) {
      barrier();
      c_ = let("chunk", first_chunk + j);
      chunk();
    }, "chunk_of_workgroup");
  }

  uint32_t target_subgroup() const { return l_.wg / l_.subgroups; }

  // Vector slot p of this lane: vector lane + p * lanes of the row (clamped; `valid` says whether
  // it is real: rows whose vector count is not a multiple of `lanes` leave some lanes idle).
  Expr<u32> vec_index(uint32_t p) const {
    auto v = lane_ + p * l_.lanes;
    return l_.nvec % l_.lanes == 0 ? v : min(v, constant<u32>(l_.nvec - 1));
  }
  Expr<boolean> vec_valid(uint32_t p) const { return lane_ + p * l_.lanes < l_.nvec; }

  // This lane's slice of the group's query heads, pre-scaled by 1/sqrt(head_dim): kVw pairs per
  // slot and head, kept in registers for the whole scan.
  void load_query() {
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
    for (uint32_t g = 0; g < hg_; ++g) {
      qh_.emplace_back();
      for (uint32_t p = 0; p < l_.per; ++p) {
        auto at = (q_row_ + g * hd_ + vec_index(p) * (2 * kVw)) / 4u;  // vec4 index
        std::vector<Expr<vec2>> pairs;
        for (uint32_t h = 0; h < kVw / 2; ++h) {
          auto four = let("q4", Expr<vec4>(q_[at + h]) * scale);  // already F16 precision (rope_kv_write)
          pairs.push_back(make_vec<f32>(four.x(), four.y()));
          pairs.push_back(make_vec<f32>(four.z(), four.w()));
        }
        if (l_.nvec % l_.lanes != 0)
          for (auto& pr : pairs) pr = select(vec_valid(p), pr, make_vec<f32>(0.0f, 0.0f));
        qh_.back().push_back(pairs);
      }
    }
  }

  Expr<u32> vector_at(Expr<u32> position, uint32_t p) const {
    if (sequences_) position = row_base_ + position;
    return position * (d_.kv_words() / kVw) + kv_ * l_.nvec + vec_index(p);
  }

  // Row group r takes `unroll_` consecutive positions per pass, all rows' K and V loads issued
  // before any arithmetic; scores by lanes x slices and a butterfly over the row's lanes; online
  // softmax per row group (max m, sum l, unnormalised weighted V in registers).
  void scan_positions() {
    for (uint32_t g = 0; g < hg_; ++g) {
      m_.push_back(k_.var<f32>("m" + std::to_string(g), kLowest));
      lsum_.push_back(k_.var<f32>("l" + std::to_string(g), 0.0f));
      acc_.emplace_back();
      for (uint32_t p = 0; p < l_.per; ++p)
        for (uint32_t w = 0; w < kVw; ++w)
          acc_.back().push_back(k_.var<vec2>("acc" + std::to_string(g), make_vec<f32>(0.0f, 0.0f)));
    }
    const uint32_t pass = l_.rows * unroll_;
    auto passes = let("passes", (count_ + (pass - 1)) / pass);
    for_range(constant<u32>(0), passes, [&](Expr<u32> i) {
      auto first = let("first", i * pass + row_group_ * unroll_);  // offset in the chunk
      std::vector<Expr<boolean>> valid;
      std::vector<std::vector<Expr<V>>> keys, values;
      for (uint32_t u = 0; u < unroll_; ++u) {
        valid.push_back(let("valid", first + u < count_));
        auto position = start_ + min(first + u, count_ - 1u);
        keys.emplace_back();
        values.emplace_back();
        for (uint32_t p = 0; p < l_.per; ++p) keys.back().push_back(let("key", Expr<V>(k_cache_[vector_at(position, p)])));
        for (uint32_t p = 0; p < l_.per; ++p) values.back().push_back(let("value", Expr<V>(v_cache_[vector_at(position, p)])));
      }
      // Scores: each lane's partial dot products, then summed over the row's lanes.
      std::vector<std::vector<Expr<f32>>> s(unroll_);
      for (uint32_t u = 0; u < unroll_; ++u)
        for (uint32_t g = 0; g < hg_; ++g) {
          Expr<f32> dot_sum = constant<f32>(0.0f);
          bool first_term = true;
          for (uint32_t p = 0; p < l_.per; ++p)
            for (uint32_t w = 0; w < kVw; ++w) {
              auto key = unpack_half2x16(keys[u][p].lane(w));
              auto term = qh_[g][p][w].x() * key.x();
              dot_sum = fma(qh_[g][p][w].y(), key.y(), first_term ? term : dot_sum + term);
              first_term = false;
            }
          auto partial = let("dot", dot_sum);
          for (uint32_t mask = l_.lanes / 2; mask > 0; mask /= 2)
            partial = let("dot", partial + subgroup_shuffle_xor(partial, constant<u32>(mask)));
          s[u].push_back(partial);
        }
      // Online softmax per subgroup: the pass's max and sum of exp(s - max) over the subgroup's
      // row groups come from subgroup operations, with no barrier; the subgroups' states are
      // merged once at the end (merge_subgroups_and_finish). acc keeps sum(p * v) unnormalised.
      for (uint32_t g = 0; g < hg_; ++g) {
        Expr<f32> best = constant<f32>(kLowest);
        for (uint32_t u = 0; u < unroll_; ++u) best = max(best, select(valid[u], s[u][g], constant<f32>(kLowest)));
        auto m_new = let("m_new", max(Expr<f32>(m_[g]), subgroup_max(best)));
        auto alpha = let("alpha", exp(Expr<f32>(m_[g]) - m_new));
        std::vector<Expr<f32>> weight;
        Expr<f32> row_sum = constant<f32>(0.0f);
        for (uint32_t u = 0; u < unroll_; ++u) {
          weight.push_back(let("weight", select(valid[u], exp(s[u][g] - m_new), constant<f32>(0.0f))));
          row_sum = u == 0 ? weight.back() : row_sum + weight.back();
        }
        auto sum = let("row_sum", row_sum);
        for (uint32_t mask = l_.lanes; mask < target_subgroup(); mask *= 2)
          sum = let("row_sum", sum + subgroup_shuffle_xor(sum, constant<u32>(mask)));
        for (uint32_t p = 0; p < l_.per; ++p)
          for (uint32_t wd = 0; wd < kVw; ++wd) {
            Expr<vec2> pass_acc = unpack_half2x16(values[0][p].lane(wd)) * weight[0];
            for (uint32_t u = 1; u < unroll_; ++u) pass_acc = pass_acc + unpack_half2x16(values[u][p].lane(wd)) * weight[u];
            acc_[g][p * kVw + wd] = Expr<vec2>(acc_[g][p * kVw + wd]) * alpha + pass_acc;
          }
        lsum_[g] = Expr<f32>(lsum_[g]) * alpha + sum;
        m_[g] = m_new;
      }
    }, "pass");
  }

  // Merges the row groups of a subgroup (a butterfly over the lanes with the same slice), then
  // the first row group of each subgroup puts the merged partial in shared memory.
  void merge_in_subgroup() {
    const uint32_t sg = target_subgroup();
    for (uint32_t mask = l_.lanes; mask < sg; mask *= 2) {
      for (uint32_t g = 0; g < hg_; ++g) {  // one max and sum for the whole workgroup: plain sums
        for (auto& acc : acc_[g]) acc = Expr<vec2>(acc) + subgroup_shuffle_xor(Expr<vec2>(acc), constant<u32>(mask));
      }
    }
    auto sgid = k_.subgroup_id();
    if_(sg_lane_ < l_.lanes, [&] {
      for (uint32_t g = 0; g < hg_; ++g) {
        auto head = sgid * hg_ + g;
        for (uint32_t p = 0; p < l_.per; ++p) {
          auto write = [&] {
            for (uint32_t w = 0; w < kVw; ++w) {
              auto at = head * hd_ + (lane_ + p * l_.lanes) * (2 * kVw) + 2 * w;
              o_sh_[at] = acc_[g][p * kVw + w].x();
              o_sh_[at + 1u] = acc_[g][p * kVw + w].y();
            }
          };
          if (l_.nvec % l_.lanes == 0) write();
          else if_(vec_valid(p), write);
        }
        if_(lane_ == 0u, [&] {
          stats_sh_[2u * head] = m_[g];
          stats_sh_[2u * head + 1u] = lsum_[g];
        });
      }
    });
  }

  // Partial (t, kv, chunk) in vec2 units: [group][head_dim / 2] outputs, then [group] (m, l).
  Expr<u32> block(Expr<u32> chunk) const { return partials_block(d_, chunks_, t_, kv_, chunk); }

  // The workgroup's partial from the subgroups' (one output pair per invocation and step); with
  // a single active chunk it is the answer, otherwise it goes out and the last workgroup of
  // (t, kv) to finish combines every chunk's.
  void merge_subgroups_and_finish() {
    // This workgroup's heads' output pairs; the group's (all split_ workgroups of the KV head)
    // follow in the partials block, then the group's stats.
    const uint32_t pairs = hg_ * hd_ / 2, group_pairs = group_ * hd_ / 2;
    auto first_pair = split_ == 1 ? zero() : let("first_pair", part_ * pairs);
    auto first_head = split_ == 1 ? zero() : let("first_head", part_ * hg_);
    // The subgroups' online-softmax states merged: each rescaled to the largest max.
    auto merged = [&](Expr<u32> i, auto&& use) {
      auto g = let("g", i / (hd_ / 2));
      Expr<f32> big = constant<f32>(kLowest);
      for (uint32_t s = 0; s < l_.subgroups; ++s) big = max(big, stats_sh_[2u * (s * hg_ + g)]);
      auto m = let("m_all", big);
      Expr<vec2> o = make_vec<f32>(0.0f, 0.0f);
      Expr<f32> total = constant<f32>(0.0f);
      // Precise (no fma contraction): the deferring and the combining kernels are different
      // shaders, and a chunk's partial must be the same bits in both.
      for (uint32_t s = 0; s < l_.subgroups; ++s) {
        auto head = s * hg_ + g;
        auto e = let("e", exp(Expr<f32>(stats_sh_[2u * head]) - m));
        auto part = make_vec<f32>(o_sh_[head * hd_ + 2u * (i % (hd_ / 2))], o_sh_[head * hd_ + 2u * (i % (hd_ / 2)) + 1u]);
        total = let_precise("chunk_total", s == 0 ? Expr<f32>(stats_sh_[2u * head + 1u]) * e : total + Expr<f32>(stats_sh_[2u * head + 1u]) * e);
        o = let_precise("chunk_o", s == 0 ? part * e : o + part * e);
      }
      auto t = let("total", total);
      use(g, m, t, let_precise("o", o / make_vec<f32>(t, t)));
    };
    auto write_partials = [&] {
      for_range(lid_, constant<u32>(pairs), l_.wg, [&](Expr<u32> i) {
        merged(i, [&](Expr<u32> g, Expr<f32> big, Expr<f32> total, Expr<vec2> o) {
          partials_[block(c_) + first_pair + i] = o;
          if_(i % (hd_ / 2) == 0u, [&] { partials_[block(c_) + group_pairs + first_head + g] = make_vec<f32>(big, total); });
        });
      }, "i");
      auto combine_here = [&] {
        count_arrival(k_, target_, counters_[t_ * d_.n_kv_heads + kv_], active_ * split_, last_sh_);
        if_(last_sh_[0u] == 1u, [&] {
          for_range(lid_, constant<u32>(group_pairs), l_.wg, [&](Expr<u32> i) { combine(i, group_pairs); }, "i");
          if_(lid_ == 0u, [&] { atomic_exchange(counters_[t_ * d_.n_kv_heads + kv_], 0u); });
        });
      };
      if (defer_)
        if_(active_ > defer_, combine_here);  // otherwise the partials are the result
      else
        combine_here();
    };
    if_(active_ == 1u, [&] {
      for_range(lid_, constant<u32>(pairs), l_.wg, [&](Expr<u32> i) {
        merged(i, [&](Expr<u32>, Expr<f32>, Expr<f32>, Expr<vec2> o) {
          out_[q_row_ / 2u + i] = o;
        });
      }, "i");
    }).else_(write_partials);
  }

  // Output pair i of the group from every active chunk's partial: an online merge, combine_unroll_
  // chunks' loads in flight at once.
  void combine(Expr<u32> i, uint32_t pairs) {
    auto g = let("g", i / (hd_ / 2));
    auto big = k_.var<f32>("big", kLowest);
    auto total = k_.var<f32>("total", 0.0f);
    auto o = k_.var<vec2>("o", make_vec<f32>(0.0f, 0.0f));
    for_range(constant<u32>(0), active_, constant<u32>(combine_unroll_), [&](Expr<u32> c0) {
      std::vector<Expr<boolean>> valid;
      std::vector<Expr<vec2>> stats, parts;
      for (uint32_t u = 0; u < combine_unroll_; ++u) {
        valid.push_back(let("valid", c0 + u < active_));
        auto at = block(min(c0 + u, active_ - 1u));
        stats.push_back(let("stats", Expr<vec2>(partials_[at + pairs + g])));
        parts.push_back(let("part", Expr<vec2>(partials_[at + i])));
      }
      const MergeState next = merge_round({big, total, {o}}, valid, stats, {parts});
      total = next.total;
      o = next.pairs[0];
      big = next.max;
    }, "c");
    auto result = let_precise("combined", Expr<vec2>(o) / make_vec<f32>(Expr<f32>(total), Expr<f32>(total)));
    out_[group_row_ / 2u + i] = result;
  }

  const std::string name_;
  const OpTarget target_;
  const bool sequences_;  // each token its own sequence (SequenceState records)
  const AttentionDims d_;
  const uint32_t split_;  // workgroups per KV head, each hg_ of its group_ query heads
  const Layout l_;
  const uint32_t context_, chunks_, hd_, group_, hg_, unroll_, combine_unroll_, defer_;
  const bool whole_pass_;  // chunks of whole passes (attention_active_chunks)
  const uint32_t per_workgroup_;
  KernelBuilder k_;
  Buffer<u32> step_;
  Buffer<vec4> q_;
  Buffer<V> k_cache_, v_cache_;
  Buffer<vec2> partials_;
  Buffer<u32> counters_;
  Buffer<vec2> out_;
  Expr<u32> n_;
  Shared<f32> o_sh_, stats_sh_;
  Shared<u32> last_sh_;
  Expr<u32> lid_, kv_, part_, c_, t_;
  Expr<u32> row_base_ = zero();
  Expr<u32> last_ = zero(), active_ = zero(), start_ = zero(), count_ = zero(), group_row_ = zero(), q_row_ = zero(), sg_lane_ = zero(),
            lane_ = zero(), row_group_ = zero();
  std::vector<std::vector<std::vector<Expr<vec2>>>> qh_;  // [head][slot][pair]
  std::vector<Var<f32>> m_, lsum_;
  std::vector<std::vector<Var<vec2>>> acc_;  // [head][slot * kVw + word]

  static Expr<u32> zero() { return constant<u32>(0); }
};

}  // namespace

dsl::Kernel attention_split_kv(const std::string& name, const OpTarget& target, const AttentionDims& d,
                               uint32_t context, uint32_t chunks, bool batch, const SplitKvTuning& tuning, bool sequences,
                               bool one_sequence) {
  if (sequences && !batch) throw std::invalid_argument(name + ": sequences are a batch of tokens");
  if (one_sequence && !sequences) throw std::invalid_argument(name + ": one sequence is a kind of sequences");
  d.check(name.c_str());
  if (chunks == 0 || context == 0) throw std::invalid_argument(name + ": need chunks > 0 and context > 0");
  const uint32_t heads = d.group() / attention_head_split(d, tuning);
  const Layout l = layout(target, d, tuning.max_lanes_per_row);
  if (shared_bytes(d, l, heads) > target.max_shared_bytes)
    throw std::invalid_argument(name + ": " + std::to_string(d.group()) + " heads of " + std::to_string(d.head_dim) +
                                " need more shared memory than the device has");
  if (l.vw == 4) return SplitKv<uvec4>(name, target, d, context, chunks, batch, tuning, sequences, one_sequence).build();
  return SplitKv<uvec2>(name, target, d, context, chunks, batch, tuning, sequences, one_sequence).build();
}

}  // namespace bdsl::ops
