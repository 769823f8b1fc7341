#include "ops/attention/attention_prefill.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/dsl.h"
#include "ops/attention/attention_merge.h"
#include "ops/common/handoff.h"
#include "ops/common/matrix_support.h"
#include "ops/common/step_state.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr float kLowest = detail::kAttentionLowest;
// Position chunks: enough workgroups to fill a large GPU (100+ multiprocessors) when a block has
// few token tiles; a 512-token block has 320 at the 2B shape and takes one chunk.
constexpr uint32_t kWantedWorkgroups = 256;
constexpr uint32_t kMaxChunks = 16;

}  // namespace

uint32_t attention_prefill_shared_bytes(const AttentionDims& d, const PrefillAttentionLayout& l) {
  const uint32_t tile = l.tile_positions(), quads = d.head_dim / 4;
  return 4 * l.tokens * d.group() * d.head_dim  // query rows
         + 8 * tile * (quads + 1)                // K tile, rows padded (no bank conflicts)
         + 8 * tile * quads                      // V tile
         + 16 * l.tokens * tile * ceil_div(d.group(), 4);  // weights
}

PrefillAttentionLayout attention_prefill_layout(const OpTarget& target, const AttentionDims& d) {
  PrefillAttentionLayout l;
  const uint32_t sg = std::max(1u, target.subgroup_size);
  l.lanes = std::min(16u, sg);
  // Workgroups of whole subgroups; fewer tokens where shared memory or the workgroup is short.
  const uint32_t min_tokens = std::max(1u, sg / l.lanes);
  while (l.tokens > min_tokens && (attention_prefill_shared_bytes(d, l) > target.max_shared_bytes ||
                                   l.workgroup() > target.max_workgroup_invocations))
    l.tokens /= 2;
  while (l.keys_per_lane > 1 && attention_prefill_shared_bytes(d, l) > target.max_shared_bytes) l.keys_per_lane /= 2;
  return l;
}

uint32_t attention_prefill_chunks(const AttentionDims& d, const PrefillAttentionLayout& l, uint32_t n) {
  return std::clamp(ceil_div(kWantedWorkgroups, d.n_kv_heads * ceil_div(n, l.tokens)), 1u, kMaxChunks);
}

std::array<uint32_t, 3> attention_prefill_grid(const AttentionDims& d, const PrefillAttentionLayout& l, uint32_t n) {
  return {d.n_kv_heads, ceil_div(n, l.tokens), attention_prefill_chunks(d, l, n)};
}

uint64_t attention_prefill_partials_bytes(const AttentionDims& d, const PrefillAttentionLayout& l, uint32_t n,
                                          uint32_t chunks) {
  const uint64_t tiles = ceil_div(n, l.tokens);
  return 16ull * tiles * d.n_kv_heads * chunks * l.tokens * d.group() * (d.head_dim / 4 + 1);
}
uint64_t attention_prefill_counters_bytes(const AttentionDims& d, const PrefillAttentionLayout& l, uint32_t n) {
  return 4ull * ceil_div(n, l.tokens) * d.n_kv_heads;
}
std::array<uint32_t, 3> attention_prefill_grid(const OpTarget& target, const AttentionDims& d, uint32_t n) {
  return attention_prefill_grid(d, attention_prefill_layout(target, d), n);
}

namespace {

// One tiled prefill attention kernel under construction (see the header for the scheme).
class TiledAttention {
 public:
  TiledAttention(const OpTarget& target, const AttentionDims& d, uint32_t context, const PrefillAttentionLayout& l)
      : d_(d), l_(l), sg_(std::max(1u, target.subgroup_size)), context_(context), hd_(d.head_dim), group_(d.group()),
        quads_(d.head_dim / 4), tile_(l.tile_positions()), slots_(ceil_div(quads_, l.lanes)),
        g4_(ceil_div(d.group(), 4)),
        k_("attention_prefill_f16kv" + handoff_suffix(target), {l.workgroup(), 1, 1}),
        step_(k_.buffer<u32>("step", Access::Read)),
        q_(k_.buffer<vec4>("q", Access::Read)),
        k_cache_(k_.buffer<uvec2>("k_cache", Access::Read)),
        v_cache_(k_.buffer<uvec2>("v_cache", Access::Read)),
        partials_(partials_buffer<vec4>(k_, target, "partials", Access::ReadWrite)),
        counters_(k_.buffer<u32>("counters", Access::ReadWrite)),
        out_(k_.buffer<vec4>("out", Access::Write)),
        n_(k_.push<u32>("n")),
        q_sh_(k_.shared<vec4>("q_rows", l.tokens * group_ * quads_)),
        k_sh_(k_.shared<uvec2>("k_tile", tile_ * (quads_ + 1))),
        v_sh_(k_.shared<uvec2>("v_tile", tile_ * quads_)),
        p_sh_(k_.shared<vec4>("weights", l.tokens * tile_ * g4_)),
        last_sh_(k_.shared<u32>("is_last", 1)),
        lid_(k_.local_index()), kv_(k_.workgroup_id().x()), target_(target) {}

  Kernel build() {
    auto tiles = let("token_tiles", (n_ + (l_.tokens - 1)) / l_.tokens);
    if_(k_.workgroup_id().y() < tiles, [&] {  // uniform over the workgroup: the barriers stay uniform
      // Last tile first: the tiles with the most positions start first.
      tile_index_ = let("token_tile", tiles - 1u - k_.workgroup_id().y());
      auto first_token = let("first_token", tile_index_ * l_.tokens);
      auto sg_lane = k_.subgroup_invocation();
      lane_ = let("lane", sg_lane % l_.lanes);
      token_ = let("token", k_.subgroup_id() * (sg_ / l_.lanes) + sg_lane / l_.lanes);
      auto pos0 = let("pos0", step_[kStepPos]);
      query_token_ = let("query_token", min(first_token + token_, n_ - 1u));  // rows past n: computed, not written
      query_pos_ = let("query_pos", min(pos0 + query_token_, constant<u32>(context_ - 1)));
      // Positions [0, end) serve the whole tile.
      auto end = let("end", min(pos0 + min(first_token + l_.tokens, n_), constant<u32>(context_)));
      // K/V tiles cut into `active` chunks of `per` tiles, at most the grid's z; workgroups past
      // `active` return at once.
      auto key_tiles = let("key_tiles", (end + (tile_ - 1)) / tile_);
      chunks_ = let("chunks", k_.num_workgroups().z());
      auto per = let("tiles_per_chunk", (key_tiles + chunks_ - 1u) / chunks_);
      active_ = let("active", (key_tiles + per - 1u) / per);
      chunk_ = let("chunk", k_.workgroup_id().z());
      if_(chunk_ < active_, [&] {
        load_queries(first_token);
        init_state();
        for_range(chunk_ * per, min(chunk_ * per + per, key_tiles), [&](Expr<u32> kt) {
          auto base = let("base", kt * tile_);
          barrier();  // the previous tile's P x V is done with the shared tiles (and q_rows is written)
          load_kv_tile(base, end);
          barrier();
          scores_and_softmax(base);
          barrier();
          accumulate(min(constant<u32>(tile_), end - base));
        }, "key_tile");
        if_(active_ == 1u, [&] { write_output(first_token); }).else_([&] { merge_chunks(first_token); });
      });
    });
    return k_.build();
  }

 private:
  // The tile's query rows, [token][head][quad], as vec4 (rows past n repeat the last).
  void load_queries(Expr<u32> first_token) {
    const uint32_t per_token = group_ * quads_;
    for_range(lid_, constant<u32>(l_.tokens * per_token), l_.workgroup(), [&](Expr<u32> i) {
      auto t = min(first_token + i / per_token, n_ - 1u);
      q_sh_[i] = q_[(t * d_.q_width() + kv_ * group_ * hd_) / 4u + i % per_token];
    }, "i");
  }

  void init_state() {
    for (uint32_t g = 0; g < group_; ++g) {
      m_.push_back(k_.var<f32>("m" + std::to_string(g), kLowest));
      l_sum_.push_back(k_.var<f32>("l" + std::to_string(g), 0.0f));
      acc_.emplace_back();
      for (uint32_t s = 0; s < slots_; ++s)
        acc_.back().push_back(k_.var<vec4>("acc" + std::to_string(g), make_vec<f32>(0.0f, 0.0f, 0.0f, 0.0f)));
    }
  }

  // K and V rows [base, base + tile) of this KV head into shared memory: every load first, then
  // every store. Rows at or past `end` repeat the last one (finite values, weighed by zero).
  void load_kv_tile(Expr<u32> base, Expr<u32> end) {
    const uint32_t total = tile_ * quads_, per = ceil_div(total, l_.workgroup());
    std::vector<Expr<uvec2>> keys, values;
    std::vector<Expr<u32>> rows, cols;
    for (uint32_t u = 0; u < per; ++u) {
      auto i = lid_ + u * l_.workgroup();
      if (total % l_.workgroup() != 0) i = min(i, constant<u32>(total - 1));  // duplicates store the same
      rows.push_back(let("row", i / quads_));
      cols.push_back(let("col", i % quads_));
      auto at = let("at", min(base + rows.back(), end - 1u) * (d_.kv_words() / 2) + kv_ * quads_ + cols.back());
      keys.push_back(let("key", Expr<uvec2>(k_cache_[at])));
      values.push_back(let("value", Expr<uvec2>(v_cache_[at])));
    }
    for (uint32_t u = 0; u < per; ++u) {
      k_sh_[rows[u] * (quads_ + 1) + cols[u]] = keys[u];
      v_sh_[rows[u] * quads_ + cols[u]] = values[u];
    }
  }

  // Scores of this lane's keys for every head of its token, then the online-softmax step: the
  // tile's row max and sum round the token's lanes, weights to shared memory, accumulators rescaled.
  void scores_and_softmax(Expr<u32> base) {
    const uint32_t kpl = l_.keys_per_lane;
    std::vector<std::vector<Var<f32>>> s(group_);
    for (uint32_t g = 0; g < group_; ++g)
      for (uint32_t i = 0; i < kpl; ++i) s[g].push_back(k_.var<f32>("s", 0.0f));
    for_range(constant<u32>(0), constant<u32>(quads_), [&](Expr<u32> c) {
      std::vector<Expr<vec4>> q;
      for (uint32_t g = 0; g < group_; ++g) q.push_back(let("q", Expr<vec4>(q_sh_[(token_ * group_ + g) * quads_ + c])));
      for (uint32_t i = 0; i < kpl; ++i) {
        auto kw = let("kw", Expr<uvec2>(k_sh_[(lane_ + i * l_.lanes) * (quads_ + 1) + c]));
        auto k01 = let("k01", unpack_half2x16(kw.x()));
        auto k23 = let("k23", unpack_half2x16(kw.y()));
        for (uint32_t g = 0; g < group_; ++g) {
          Expr<f32> acc = s[g][i];
          acc = fma(q[g].x(), k01.x(), acc);
          acc = fma(q[g].y(), k01.y(), acc);
          acc = fma(q[g].z(), k23.x(), acc);
          acc = fma(q[g].w(), k23.y(), acc);
          s[g][i] = acc;
        }
      }
    }, "c");
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
    std::vector<Expr<boolean>> valid;
    for (uint32_t i = 0; i < kpl; ++i) valid.push_back(let("valid", base + lane_ + i * l_.lanes <= query_pos_));
    std::vector<std::vector<Expr<f32>>> p(group_);
    for (uint32_t g = 0; g < group_; ++g) {
      std::vector<Expr<f32>> scaled;
      Expr<f32> best = m_[g];
      for (uint32_t i = 0; i < kpl; ++i) {
        scaled.push_back(let("score", Expr<f32>(s[g][i]) * scale));
        best = max(best, select(valid[i], scaled[i], constant<f32>(kLowest)));
      }
      auto m_new = let("m_new", butterfly(best, true));
      auto alpha = let("alpha", exp(Expr<f32>(m_[g]) - m_new));  // 0 on the first tile
      std::vector<Expr<f32>> e;
      Expr<f32> sum = constant<f32>(0.0f);
      for (uint32_t i = 0; i < kpl; ++i) {
        e.push_back(let("e", select(valid[i], exp(scaled[i] - m_new), constant<f32>(0.0f))));
        sum = i == 0 ? e[i] : sum + e[i];
      }
      // The weights are e / tile_sum, as the reference's e / sum (and the decode kernel's), so
      // the sum of the tile's weighted V is one normalised average, merged into the running one
      // by keep and fresh. On a row's first tile keep = 0 and fresh = 1 exactly: a context of
      // one tile is weighed exactly as the reference weighs it.
      auto total = let("tile_sum", butterfly(let("lane_sum", sum), false));
      auto scaled_l = let("scaled_l", Expr<f32>(l_sum_[g]) * alpha);
      auto l_new = let("l_new", scaled_l + total);
      auto keep = let("keep", select(l_new > 0.0f, scaled_l / l_new, constant<f32>(0.0f)));  // a chunk's empty row
      auto fresh = let("fresh", select(scaled_l == 0.0f, constant<f32>(1.0f), total / l_new));
      for (uint32_t i = 0; i < kpl; ++i)  // a row with no weight in this tile: total may be 0
        p[g].push_back(let("p", select(total > 0.0f, e[i] / total * fresh, constant<f32>(0.0f))));
      l_sum_[g] = l_new;
      m_[g] = m_new;
      for (auto& a : acc_[g]) a = Expr<vec4>(a) * keep;
    }
    for (uint32_t i = 0; i < kpl; ++i)
      for (uint32_t g4 = 0; g4 < g4_; ++g4) {
        auto lane = [&](uint32_t j) { return 4 * g4 + j < group_ ? p[4 * g4 + j][i] : constant<f32>(0.0f); };
        p_sh_[((token_ * tile_) + lane_ + i * l_.lanes) * g4_ + g4] = make_vec<f32>(lane(0), lane(1), lane(2), lane(3));
      }
  }

  // Max (or sum) over the `lanes` invocations of this token: the same value in each of them.
  Expr<f32> butterfly(Expr<f32> x, bool take_max) {
    for (uint32_t mask = l_.lanes / 2; mask > 0; mask /= 2) {
      auto other = subgroup_shuffle_xor(x, constant<u32>(mask));
      x = let(take_max ? "row_max" : "row_sum", take_max ? max(x, other) : x + other);
    }
    return x;
  }

  // acc += p x V over the tile's first `count` positions, for this lane's 4-dim slices.
  void accumulate(Expr<u32> count) {
    for_range(constant<u32>(0), count, [&](Expr<u32> j) {
      std::vector<Expr<vec4>> w;
      for (uint32_t g4 = 0; g4 < g4_; ++g4) w.push_back(let("w", Expr<vec4>(p_sh_[(token_ * tile_ + j) * g4_ + g4])));
      for (uint32_t s = 0; s < slots_; ++s) {
        auto vw = let("vw", Expr<uvec2>(v_sh_[j * quads_ + slot(s)]));
        auto v = let("v", make_vec<f32>(unpack_half2x16(vw.x()).x(), unpack_half2x16(vw.x()).y(),
                                        unpack_half2x16(vw.y()).x(), unpack_half2x16(vw.y()).y()));
        for (uint32_t g = 0; g < group_; ++g) acc_[g][s] = Expr<vec4>(acc_[g][s]) + v * w[g / 4].lane(g % 4);
      }
    }, "j");
  }

  // Slot s of this lane: 4-dim slice lane + s * lanes (clamped; see slot_valid).
  Expr<u32> slot(uint32_t s) const {
    auto q = lane_ + s * l_.lanes;
    return quads_ % l_.lanes == 0 ? q : min(q, constant<u32>(quads_ - 1));
  }
  Expr<boolean> slot_valid(uint32_t s) const { return lane_ + s * l_.lanes < quads_; }

  void write_output(Expr<u32> first_token) {
    if_(first_token + token_ < n_, [&] {
      for (uint32_t g = 0; g < group_; ++g) {
        auto row = (query_token_ * d_.q_width() + (kv_ * group_ + g) * hd_) / 4u;
        for (uint32_t s = 0; s < slots_; ++s) {
          auto write = [&] { out_[row + slot(s)] = Expr<vec4>(acc_[g][s]); };
          if (quads_ % l_.lanes == 0) write();
          else if_(slot_valid(s), write);
        }
      }
    });
  }

  // A chunk's partial of query row r (token * group + head): quads_ vec4 of its average, then
  // (m, l, 0, 0).
  Expr<u32> partial(Expr<u32> chunk, Expr<u32> row) const {
    return (((tile_index_ * d_.n_kv_heads + kv_) * chunks_ + chunk) * (l_.tokens * group_) + row) * (quads_ + 1);
  }

  // Several chunks: each writes its partial, the last of the `active` to finish (an atomic count
  // per token tile and KV head) merges them all and puts the count back to zero for the next replay.
  void merge_chunks(Expr<u32> first_token) {
    for (uint32_t g = 0; g < group_; ++g) {
      auto at = partial(chunk_, token_ * group_ + g);
      for (uint32_t s = 0; s < slots_; ++s) {
        auto write = [&] { partials_[at + slot(s)] = Expr<vec4>(acc_[g][s]); };
        if (quads_ % l_.lanes == 0) write();
        else if_(slot_valid(s), write);
      }
      if_(lane_ == 0u, [&] { partials_[at + quads_] = make_vec<f32>(Expr<f32>(m_[g]), Expr<f32>(l_sum_[g]), 0.0f, 0.0f); });
    }
    auto counter = tile_index_ * d_.n_kv_heads + kv_;
    count_arrival(k_, target_, counters_[counter], active_, last_sh_);
    if_(last_sh_[0u] == 1u, [&] {
      const uint32_t per_tile = l_.tokens * group_ * quads_;
      for_range(lid_, constant<u32>(per_tile), l_.workgroup(), [&](Expr<u32> i) {
        auto row = let("row", i / quads_);
        auto token = let("t", first_token + row / group_);
        if_(token < n_, [&] { combine(row, i % quads_, (token * d_.q_width() + kv_ * group_ * hd_) / 4u + i % (group_ * quads_)); });
      }, "i");
      if_(lid_ == 0u, [&] { atomic_exchange(counters_[counter], 0u); });
    });
  }

  // Output slice `quad` of query row `row` from every active chunk's partial (online merge).
  void combine(Expr<u32> row, Expr<u32> quad, Expr<u32> out_at) {
    auto big = k_.var<f32>("big", kLowest);
    auto total = k_.var<f32>("total", 0.0f);
    auto o = k_.var<vec4>("o", make_vec<f32>(0.0f, 0.0f, 0.0f, 0.0f));
    for_range(constant<u32>(0), active_, [&](Expr<u32> c) {
      auto at = partial(c, row);
      auto stats = let("stats", Expr<vec4>(partials_[at + quads_]));
      auto part = let("part", Expr<vec4>(partials_[at + quad]));
      auto m_new = let("m_new", max(Expr<f32>(big), stats.x()));
      auto alpha = let("alpha", exp(Expr<f32>(big) - m_new));
      auto weight = let("weight", exp(stats.x() - m_new) * stats.y());
      total = Expr<f32>(total) * alpha + weight;
      o = Expr<vec4>(o) * alpha + part * weight;
      big = m_new;
    }, "c");
    out_[out_at] = Expr<vec4>(o) / Expr<f32>(total);
  }

  const AttentionDims d_;
  const PrefillAttentionLayout l_;
  const uint32_t sg_, context_, hd_, group_, quads_, tile_, slots_, g4_;
  KernelBuilder k_;
  Buffer<u32> step_;
  Buffer<vec4> q_;
  Buffer<uvec2> k_cache_, v_cache_;
  Buffer<vec4> partials_;
  Buffer<u32> counters_;
  Buffer<vec4> out_;
  Expr<u32> n_;
  Shared<vec4> q_sh_;
  Shared<uvec2> k_sh_, v_sh_;
  Shared<vec4> p_sh_;
  Shared<u32> last_sh_;
  Expr<u32> lid_, kv_;
  OpTarget target_;
  Expr<u32> lane_ = constant<u32>(0), token_ = constant<u32>(0), query_token_ = constant<u32>(0),
            query_pos_ = constant<u32>(0), tile_index_ = constant<u32>(0), chunks_ = constant<u32>(0),
            active_ = constant<u32>(0), chunk_ = constant<u32>(0);
  std::vector<Var<f32>> m_, l_sum_;
  std::vector<std::vector<Var<vec4>>> acc_;  // [head][slot]
};

}  // namespace

dsl::Kernel attention_prefill(const OpTarget& target, const AttentionDims& d, uint32_t context,
                              const PrefillAttentionLayout& l) {
  d.check("attention_prefill");
  const uint32_t sg = std::max(1u, target.subgroup_size);
  if (context == 0) throw std::invalid_argument("attention_prefill: need context > 0");
  if (l.lanes == 0 || (l.lanes & (l.lanes - 1)) != 0 || l.lanes > sg || l.workgroup() % std::min(sg, l.workgroup()) != 0 ||
      l.keys_per_lane == 0 || l.tokens == 0)
    throw std::invalid_argument("attention_prefill: lanes must be a power of two up to the subgroup size, the "
                                "workgroup whole subgroups");
  if (attention_prefill_shared_bytes(d, l) > target.max_shared_bytes)
    throw std::invalid_argument("attention_prefill: " + std::to_string(d.group()) + " heads of " +
                                std::to_string(d.head_dim) + " need more shared memory than the device has");
  return TiledAttention(target, d, context, l).build();
}

dsl::Kernel attention_prefill(const OpTarget& target, const AttentionDims& d, uint32_t context) {
  return attention_prefill(target, d, context, attention_prefill_layout(target, d));
}

Plan plan_attention_prefill(const OpTarget& target, const AttentionDims& d, uint32_t context,
                            const PrefillAttentionLayout& layout) {
  return {attention_prefill(target, d, context, layout), [d, layout](uint32_t n) {
            const auto g = attention_prefill_grid(d, layout, n);
            return rt::Grid{g[0], g[1], g[2]};
          }};
}

}  // namespace bdsl::ops
