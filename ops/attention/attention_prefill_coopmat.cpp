#include "ops/attention/attention_prefill_coopmat.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/dsl.h"
#include "ops/attention/attention_merge.h"
#include "ops/common/half_rounding.h"
#include "ops/common/handoff.h"
#include "ops/common/matrix_support.h"
#include "ops/common/step_state.h"
#include "ops/tuning.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

constexpr float kLowest = detail::kAttentionLowest;
constexpr uint32_t kTokens = 16;  // query tokens per workgroup: the matrices' rows
constexpr uint32_t kKeys = 32;    // K/V positions per tile
constexpr uint32_t kLanes = 32;   // the subgroup
// p goes into the F16 matrices times 2^10 (exact), so that lo = p - hi stays a normal F16 number
// down to p ~ 1e-4 (F16 normals start at 2^-14; packHalf2x16 may flush smaller ones); the output
// is scaled back by 2^-10, exactly.
constexpr float kWeightScale = 1024.0f;
constexpr MatrixShape kShape{16, 16, 16, ScalarKind::F16, ScalarKind::F32};
constexpr uint32_t kMaxChunks = 16;
// The merge keeps each row's chunks' weights and sums and its total in the scores' rows.
static_assert(2 * kMaxChunks + 1 <= kKeys + 4, "the merge's stash fits in the scores");

// f32 words of a query row's partial: its head_dim averages, then m and l.
uint32_t partial_words(const AttentionDims& d) { return d.head_dim + 2; }

// Bytes of shared memory: the stage (q rows, then a K and a V tile), the scores, the weights' hi
// and lo halves.
uint32_t shared_bytes(const AttentionDims& d, uint32_t parts = 1) {
  const uint32_t row_words = d.head_dim / 8 + 1, group = d.group();
  return 16 * std::max(group * kTokens, 2 * kKeys) * row_words + 4 * group * kTokens * (kKeys + 4) +
         16 * 2 * group * kTokens * (kKeys / 8 + 1) + (parts > 1 ? 4 * 2 * parts * group * kTokens : 0);
}

// Subgroups per query head: ops/tuning.h's where head_dim's blocks divide between them and the
// workgroup and its shared memory allow, else 1.
uint32_t parts_for(const OpTarget& target, const AttentionDims& d) {
  const uint32_t parts = std::max(1u, tuning_for(target).prefill_coopmat_attention_subgroups_per_head);
  if (parts == 1 || parts > kKeys / 16 || (d.head_dim / 16) % parts != 0 ||
      d.group() * kLanes * parts > target.max_workgroup_invocations || shared_bytes(d, parts) > target.max_shared_bytes)
    return 1;
  return parts;
}

// One kernel under construction. The stage and the weights are 16-byte words of F16 values, rows
// padded by one word (`row_words`, `p_words`), so 8 rows' 16-byte loads meet no bank conflict;
// the scores are f32.
class CoopAttention {
 public:
  CoopAttention(const OpTarget& target, const AttentionDims& d, uint32_t context)
      : target_(target), d_(d), context_(context), hd_(d.head_dim), group_(d.group()), row_words_(d.head_dim / 8 + 1),
        dim_blocks_(d.head_dim / 16), p_words_(kKeys / 8 + 1), s_stride_(kKeys + 4),
        lean_(tuning_for(target).prefill_coopmat_attention_lean_weights), parts_(parts_for(target, d)),
        threads_(d.group() * kLanes * parts_), lane_keys_(kKeys / 2 / parts_), part_dims_(d.head_dim / 16 / parts_),
        k_("attention_prefill_coopmat_f16kv" + std::string(lean_ ? "_lean" : "") +
               (parts_ > 1 ? "_sg" + std::to_string(parts_) : "") + handoff_suffix(target),
           {d.group() * kLanes * parts_, 1, 1}),
        step_(k_.buffer<u32>("step", Access::Read)),
        q_(k_.buffer<vec4>("q", Access::Read)),
        k_cache_(k_.buffer<uvec4>("k_cache", Access::Read)),
        v_cache_(k_.buffer<uvec4>("v_cache", Access::Read)),
        partials_(partials_buffer<f32>(k_, target, "partials", Access::ReadWrite)),
        counters_(k_.buffer<u32>("counters", Access::ReadWrite)),
        out_(k_.buffer<f32>("out", Access::Write)),
        n_(k_.push<u32>("n")),
        // The tile's q rows (head-major), then K and V tiles: one array for both phases.
        stage_(k_.shared<uvec4>("stage", std::max(d.group() * kTokens, 2 * kKeys) * row_words_)),
        scores_(k_.shared<f32>("scores", d.group() * kTokens * s_stride_)),
        probs_(k_.shared<uvec4>("probs", 2 * d.group() * kTokens * p_words_)),
        last_sh_(k_.shared<u32>("is_last", 1)),
        lid_(k_.local_index()), kv_(k_.workgroup_id().x() % d.n_kv_heads),
        head_(parts_ > 1 ? k_.subgroup_id() % d.group() : k_.subgroup_id()),
        part_(parts_ > 1 ? k_.subgroup_id() / d.group() : constant<u32>(0u)), lane_(k_.subgroup_invocation()) {
    if (parts_ > 1) stats_.emplace(k_.shared<f32>("part_stats", 2 * parts_ * d.group() * kTokens));
  }

  Kernel build() {
    auto tiles = let("token_tiles", (n_ + (kTokens - 1)) / kTokens);
    // Last tile first: the tiles with the most positions start first.
    auto first_token = let("first_token", (tiles - 1u - k_.workgroup_id().y()) * kTokens);
    auto pos0 = let("pos0", step_[kStepPos]);
    // This lane's query row (token) and half of each K/V tile's keys in the softmax steps.
    row_ = let("row", lane_ >> 1u);
    half_ = let("half", lane_ & 1u);
    // This lane's first key of each K/V tile: its row's keys are split between its part's two lanes.
    key_at_ = parts_ > 1 ? let("key_at", part_ * (kKeys / parts_) + half_ * lane_keys_) : half_ * lane_keys_;
    auto query_token = let("query_token", min(first_token + row_, n_ - 1u));  // rows past n: computed, not written
    query_pos_ = let("query_pos", min(pos0 + query_token, constant<u32>(context_ - 1)));
    auto end = let("end", min(pos0 + min(first_token + kTokens, n_), constant<u32>(context_)));
    auto key_tiles = let("key_tiles", (end + (kKeys - 1)) / kKeys);
    // The K/V tiles cut into `active` chunks of `per`, at most the grid's; workgroups past
    // `active` return at once (a uniform branch: the barriers stay uniform).
    chunks_ = let("chunks", k_.num_workgroups().x() / d_.n_kv_heads);
    auto per = let("tiles_per_chunk", (key_tiles + chunks_ - 1u) / chunks_);
    active_ = let("active", (key_tiles + per - 1u) / per);
    chunk_ = let("chunk", k_.workgroup_id().x() / d_.n_kv_heads);
    if_(chunk_ < active_, [&] { attend(first_token, chunk_ * per, min(chunk_ * per + per, key_tiles), end); });
    return k_.build();
  }

 private:
  // Query rows [first_token, +kTokens) against K/V tiles [first_tile, end_tile), positions < end.
  void attend(Expr<u32> first_token, Expr<u32> first_tile, Expr<u32> end_tile, Expr<u32> end) {
    load_queries(first_token);
    barrier();
    std::vector<MatrixA<f16, 16, 16>> q;
    for (uint32_t c = 0; c < dim_blocks_; ++c) {
      q.push_back(k_.matrix<MatrixA<f16, 16, 16>>("q" + std::to_string(c)));
      q.back().load(stage_, head_ * (kTokens * row_words_) + 2 * c, row_words_, MatrixLayout::RowMajor);
    }
    // This subgroup's 16-key blocks of each K/V tile (its part's).
    const uint32_t key_blocks = kKeys / 16 / parts_;
    std::vector<MatrixAcc<f32, 16, 16>> s;
    for (uint32_t j = 0; j < key_blocks; ++j) s.push_back(k_.matrix<MatrixAcc<f32, 16, 16>>("s" + std::to_string(j), 0.0f));
    auto kt = k_.matrix<MatrixB<f16, 16, 16>>("kt");
    // Scores of the K tile in the stage for this subgroup's head (and part's keys), into `scores`
    // (rows: tokens).
    auto scores_of_tile = [&] {
      for (uint32_t jj = 0; jj < key_blocks; ++jj) {
        const Expr<u32> j = parts_ > 1 ? part_ * key_blocks + jj : constant<u32>(jj);
        s[jj].fill(0.0f);
        for (uint32_t c = 0; c < dim_blocks_; ++c) {
          kt.load(stage_, j * (16 * row_words_) + 2 * c, row_words_, MatrixLayout::ColumnMajor);
          s[jj].mul_add(q[c], kt);
        }
        s[jj].store(scores_, head_ * (kTokens * s_stride_) + j * 16u, s_stride_, MatrixLayout::RowMajor);
      }
    };

    // Pass 1: each row's max and sum of exp(score - max) over its positions.
    auto m = k_.var<f32>("m", kLowest);
    auto l = k_.var<f32>("l", 0.0f);
    for_range(first_tile, end_tile, [&](Expr<u32> t) {
      auto base = let("base", t * kKeys);
      barrier();  // the previous tile's loads from the stage are done
      load_rows(k_cache_, base, end, 0);
      barrier();
      scores_of_tile();
      barrier();
      std::vector<Expr<f32>> sc;
      std::vector<Expr<boolean>> valid;
      Expr<f32> best = constant<f32>(kLowest);
      for (uint32_t i = 0; i < lane_keys_; ++i) {
        sc.push_back(score(i));
        valid.push_back(key_valid(base, i));
        best = max(best, select(valid[i], sc[i], constant<f32>(kLowest)));
      }
      auto m_new = let("m_new", max(Expr<f32>(m), pair_max(let("tile_max", best))));
      Expr<f32> sum = constant<f32>(0.0f);
      for (uint32_t i = 0; i < lane_keys_; ++i) sum = sum + select(valid[i], exp(sc[i] - m_new), constant<f32>(0.0f));
      auto tile_sum = let("tile_sum", pair_sum(let("lane_sum", sum)));
      l = Expr<f32>(l) * exp(Expr<f32>(m) - m_new) + tile_sum;
      m = m_new;
    }, "key_tile");
    if (parts_ > 1) {  // each row's max and sum over its parts' keys, the same in every part
      auto stat_at = [&](Expr<u32> part) { return ((part * group_ + head_) * kTokens + row_) * 2u; };
      if_(half_ == 0u, [&] {
        (*stats_)[stat_at(part_)] = Expr<f32>(m);
        (*stats_)[stat_at(part_) + 1u] = Expr<f32>(l);
      });
      barrier();
      Expr<f32> m_all = Expr<f32>((*stats_)[stat_at(constant<u32>(0u))]);
      for (uint32_t pt = 1; pt < parts_; ++pt) m_all = max(m_all, Expr<f32>((*stats_)[stat_at(constant<u32>(pt))]));
      auto m_row = let("m_row", m_all);
      Expr<f32> l_all = constant<f32>(0.0f);
      for (uint32_t pt = 0; pt < parts_; ++pt)
        l_all = l_all + Expr<f32>((*stats_)[stat_at(constant<u32>(pt)) + 1u]) * exp(Expr<f32>((*stats_)[stat_at(constant<u32>(pt))]) - m_row);
      l = l_all;
      m = m_row;
    }

    // Pass 2: p = exp(score - max) / sum, then p x V as hi + lo F16 matrices (times kWeightScale).
    // Lean weights: p = exp(score - max) * (kWeightScale / sum), and hi = p with its last 13
    // mantissa bits cleared (F16's 10 kept; lo = p - hi < 2^-10 p, exact in f32): a multiply and
    // an AND a weight in place of a division and round_to_half's ~14 operations, within 2^-21 of
    // p either way (see the header).
    auto weight_scale = lean_ ? let("weight_scale", kWeightScale / Expr<f32>(l)) : constant<f32>(0.0f);
    std::vector<MatrixAcc<f32, 16, 16>> o;
    // This subgroup's head_dim blocks of the output (its part's): block part * part_dims_ + c.
    for (uint32_t c = 0; c < part_dims_; ++c) o.push_back(k_.matrix<MatrixAcc<f32, 16, 16>>("o" + std::to_string(c), 0.0f));
    auto dim_block = [&](uint32_t c) { return parts_ > 1 ? part_ * part_dims_ + c : constant<u32>(c); };
    auto p_hi = k_.matrix<MatrixA<f16, 16, 16>>("p_hi");
    auto p_lo = k_.matrix<MatrixA<f16, 16, 16>>("p_lo");
    auto v = k_.matrix<MatrixB<f16, 16, 16>>("v");
    const uint32_t lo_at = group_ * kTokens * p_words_;
    for_range(first_tile, end_tile, [&](Expr<u32> t) {
      auto base = let("base", t * kKeys);
      barrier();  // the previous tile's loads from the stage and the weights are done
      load_rows(k_cache_, base, end, 0);
      load_rows(v_cache_, base, end, kKeys * row_words_);
      barrier();
      scores_of_tile();
      barrier();
      std::vector<Expr<f32>> p;
      for (uint32_t i = 0; i < lane_keys_; ++i) {
        auto e = exp(score(i) - Expr<f32>(m));
        p.push_back(let("p", lean_ ? select(key_valid(base, i), e * weight_scale, constant<f32>(0.0f))
                                  : select(key_valid(base, i), e / Expr<f32>(l), constant<f32>(0.0f)) * kWeightScale));
      }
      auto hi_of = [&](Expr<f32> x) { return lean_ ? bitcast<f32>(bitcast<u32>(x) & 0xFFFFE000u) : round_to_half(x); };
      auto at = let("p_at", (head_ * kTokens + row_) * p_words_ + key_at_ / 8u);
      for (uint32_t w = 0; w < lane_keys_ / 8; ++w) {  // 8 weights a 16-byte word
        std::vector<Expr<u32>> hi, lo;
        for (uint32_t j = 0; j < 4; ++j) {
          // Not unpackHalf2x16(packHalf2x16(p)), which the driver folds into p.
          auto h0 = let("p_hi_value", hi_of(p[8 * w + 2 * j]));
          auto h1 = let("p_hi_value", hi_of(p[8 * w + 2 * j + 1]));
          hi.push_back(pack_half2x16(make_vec<f32>(h0, h1)));
          lo.push_back(pack_half2x16(make_vec<f32>(p[8 * w + 2 * j] - h0, p[8 * w + 2 * j + 1] - h1)));
        }
        probs_[at + w] = make_vec<u32>(hi[0], hi[1], hi[2], hi[3]);
        probs_[at + (lo_at + w)] = make_vec<u32>(lo[0], lo[1], lo[2], lo[3]);
      }
      barrier();
      for (uint32_t kk = 0; kk < kKeys / 16; ++kk) {
        auto p_at = head_ * (kTokens * p_words_) + 2 * kk;
        p_hi.load(probs_, p_at, p_words_, MatrixLayout::RowMajor);
        p_lo.load(probs_, p_at + lo_at, p_words_, MatrixLayout::RowMajor);
        for (uint32_t c = 0; c < part_dims_; ++c) {
          v.load(stage_, dim_block(c) * 2u + (kKeys + kk * 16) * row_words_, row_words_, MatrixLayout::RowMajor);
          o[c].mul_add(p_hi, v);
          o[c].mul_add(p_lo, v);
        }
      }
    }, "key_tile");

    // The output (one chunk) or this chunk's partial, a 16 x 16 block at a time through this
    // subgroup's scores rows: put(word of the row, value) for this lane's 8 values of each block.
    // Each part's block goes through its own 16 columns of the rows.
    auto each_value = [&](const std::function<void(Expr<u32> word, Expr<f32> value)>& put) {
      for (uint32_t c = 0; c < part_dims_; ++c) {
        barrier();
        o[c].store(scores_, head_ * (kTokens * s_stride_) + part_ * 16u, s_stride_, MatrixLayout::RowMajor);
        barrier();
        for (uint32_t e = 0; e < 8; ++e)
          put(dim_block(c) * 16u + e,
              scores_[(head_ * kTokens + row_) * s_stride_ + part_ * 16u + half_ * 8u + e] * (1.0f / kWeightScale));
      }
    };
    auto token = let("out_token", first_token + row_);
    if_(active_ == 1u, [&] {
      auto out_row = let("out_row", token * d_.q_width() + (kv_ * group_ + head_) * hd_ + half_ * 8u);
      each_value([&](Expr<u32> word, Expr<f32> value) { if_(token < n_, [&] { out_[out_row + word] = value; }); });
    }).else_([&] {
      auto at = let("partial_at", partial(chunk_, head_ * kTokens + row_));
      each_value([&](Expr<u32> word, Expr<f32> value) { partials_[at + half_ * 8u + word] = value; });
      if_(half_ == 0u && part_ == 0u, [&] {
        partials_[at + hd_] = Expr<f32>(m);
        partials_[at + (hd_ + 1)] = Expr<f32>(l);
      });
      merge_chunks(first_token);
    });
  }

  // f32 word 0 of chunk c's partial of query row r (head * kTokens + token): head_dim averages
  // (the chunk's p x V, its weights summing to 1), then the chunk's m and l.
  Expr<u32> partial(Expr<u32> c, Expr<u32> r) {
    return (((k_.workgroup_id().y() * d_.n_kv_heads + kv_) * chunks_ + c) * (group_ * kTokens) + r) * partial_words(d_);
  }

  // The last of the `active` chunks to count itself (an atomic count per token tile and KV head)
  // merges them all and puts the count back to zero for the next replay. Every load that a merge
  // step needs is independent of the others, so that a step costs one trip to L2, not one per
  // chunk and value: each row's (m, l) go to shared memory (the scores' rows, free now), each row
  // weighs its chunks there, then each subgroup sums its head's rows with the lanes along head_dim,
  // every value of a chunk loaded at once.
  void merge_chunks(Expr<u32> first_token) {
    auto counter = let("counter", k_.workgroup_id().y() * d_.n_kv_heads + kv_);
    count_arrival(k_, target_, counters_[counter], active_, last_sh_);
    // As a broadcast, so that the uniformity check lets the merge's barriers follow it.
    auto last = k_.broadcast("merges", Expr<u32>(last_sh_[0u]));
    if_(last == 1u, [&] {
      const uint32_t rows = group_ * kTokens, threads = threads_;
      auto weight_at = [&](Expr<u32> r, Expr<u32> c) { return r * kMaxChunks + c; };
      const uint32_t l_at = rows * kMaxChunks, total_at = 2 * rows * kMaxChunks;
      for_range(lid_, rows * active_, constant<u32>(threads), [&](Expr<u32> i) {
        auto r = let("merge_row", i / active_);
        auto c = let("merge_chunk", i % active_);
        auto at = let("at", partial(c, r));
        scores_[weight_at(r, c)] = Expr<f32>(partials_[at + hd_]);
        scores_[weight_at(r, c) + l_at] = Expr<f32>(partials_[at + (hd_ + 1)]);
      }, "i");
      barrier();
      for_range(lid_, constant<u32>(rows), constant<u32>(threads), [&](Expr<u32> r) {
        auto big = k_.var<f32>("big", kLowest);
        for_range(constant<u32>(0u), active_, [&](Expr<u32> c) { big = max(Expr<f32>(big), Expr<f32>(scores_[weight_at(r, c)])); }, "c");
        auto total = k_.var<f32>("total", 0.0f);
        for_range(constant<u32>(0u), active_, [&](Expr<u32> c) {
          auto w = let("weight", exp(Expr<f32>(scores_[weight_at(r, c)]) - Expr<f32>(big)) * Expr<f32>(scores_[weight_at(r, c) + l_at]));
          scores_[weight_at(r, c)] = w;
          total = Expr<f32>(total) + w;
        }, "c");
        scores_[total_at + r] = Expr<f32>(total);
      }, "r");
      barrier();
      // Rows of this subgroup's head in passes of at most 64 sums a lane (the first part's subgroups).
      auto sum_rows = [&] {
        const uint32_t per_row = ceil_div(hd_, kLanes), pass_rows = std::max(1u, std::min(kTokens, 64 / per_row));
        for (uint32_t r0 = 0; r0 < kTokens; r0 += pass_rows) {
          const uint32_t n_rows = std::min(pass_rows, kTokens - r0);
          std::vector<Var<f32>> o;
          for (uint32_t i = 0; i < n_rows * per_row; ++i) o.push_back(k_.var<f32>("o", 0.0f));
          auto value = [&](uint32_t j) { return min(lane_ + j * kLanes, constant<u32>(hd_ - 1)); };
          for_range(constant<u32>(0u), active_, [&](Expr<u32> c) {
            for (uint32_t t = 0; t < n_rows; ++t) {
              auto r = head_ * kTokens + (r0 + t);
              auto w = let("weight", Expr<f32>(scores_[weight_at(r, c)]));
              auto at = let("at", partial(c, r));
              for (uint32_t j = 0; j < per_row; ++j)
                o[t * per_row + j] = Expr<f32>(o[t * per_row + j]) + Expr<f32>(partials_[at + (hd_ % kLanes ? value(j) : lane_ + j * kLanes)]) * w;
            }
          }, "c");
          for (uint32_t t = 0; t < n_rows; ++t) {
            auto token = first_token + (r0 + t);
            auto r = head_ * kTokens + (r0 + t);
            if_(token < n_, [&] {
              auto total = let("total", Expr<f32>(scores_[total_at + r]));
              auto out_at = let("out_at", token * d_.q_width() + (kv_ * group_ + head_) * hd_ + lane_);
              for (uint32_t j = 0; j < per_row; ++j) {
                auto put = [&] { out_[out_at + j * kLanes] = Expr<f32>(o[t * per_row + j]) / total; };
                if (hd_ % kLanes == 0) put();
                else if_(lane_ + j * kLanes < hd_, put);
              }
            });
          }
        }
      };
      if (parts_ > 1)
        if_(part_ == 0u, sum_rows);
      else
        sum_rows();
      if_(lid_ == 0u, [&] { atomic_exchange(counters_[counter], 0u); });
    });
  }

  // q rows of the tile's tokens (past n: the last), head-major, F16 pairs packed: 8 values a word.
  void load_queries(Expr<u32> first_token) {
    const uint32_t words = hd_ / 8, total = group_ * kTokens * words;
    for_range(lid_, constant<u32>(total), threads_, [&](Expr<u32> i) {
      auto r = let("q_row", i / words);  // head * kTokens + token
      auto c = let("q_word", i % words);
      auto t = min(first_token + r % kTokens, n_ - 1u);
      auto at = let("q_at", (t * d_.q_width() + (kv_ * group_ + r / kTokens) * hd_) / 4u + 2u * c);
      auto a = let("q_a", Expr<vec4>(q_[at]));
      auto b = let("q_b", Expr<vec4>(q_[at + 1u]));
      stage_[r * row_words_ + c] = make_vec<u32>(pack_half2x16(make_vec<f32>(a.x(), a.y())), pack_half2x16(make_vec<f32>(a.z(), a.w())),
                                                 pack_half2x16(make_vec<f32>(b.x(), b.y())), pack_half2x16(make_vec<f32>(b.z(), b.w())));
    }, "i");
  }

  // Cache rows [base, base + kKeys) of this KV head into the stage at `offset` (rows at or past
  // `end` repeat the last one: finite values, weighed by zero).
  void load_rows(const Buffer<uvec4>& cache, Expr<u32> base, Expr<u32> end, uint32_t offset) {
    const uint32_t words = hd_ / 8, total = kKeys * words, per = ceil_div(total, threads_);
    std::vector<Expr<uvec4>> loaded;
    std::vector<Expr<u32>> to;
    for (uint32_t u = 0; u < per; ++u) {
      auto i = lid_ + u * threads_;
      if (total % threads_ != 0) i = min(i, constant<u32>(total - 1));  // duplicates store the same
      auto r = let("kv_row", i / words);
      auto c = let("kv_word", i % words);
      loaded.push_back(let("kv_words", Expr<uvec4>(cache[min(base + r, end - 1u) * (d_.kv_width() / 8) + kv_ * words + c])));
      to.push_back(let("kv_to", r * row_words_ + c + offset));
    }
    for (uint32_t u = 0; u < per; ++u) stage_[to[u]] = loaded[u];
  }

  // This lane's score i (key half * 16 + i of the tile), scaled by 1 / sqrt(head_dim).
  Expr<f32> score(uint32_t i) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd_));
    return let("score", Expr<f32>(scores_[(head_ * kTokens + row_) * s_stride_ + key_at_ + i]) * scale);
  }
  Expr<boolean> key_valid(Expr<u32> base, uint32_t i) { return base + key_at_ + i <= query_pos_; }
  // Over the two lanes of a row.
  static Expr<f32> pair_max(Expr<f32> x) { return max(x, subgroup_shuffle_xor(x, constant<u32>(1u))); }
  static Expr<f32> pair_sum(Expr<f32> x) { return x + subgroup_shuffle_xor(x, constant<u32>(1u)); }

  const OpTarget target_;
  const AttentionDims d_;
  const uint32_t context_, hd_, group_, row_words_, dim_blocks_, p_words_, s_stride_;
  const bool lean_;  // ops/tuning.h's prefill_coopmat_attention_lean_weights
  // Subgroups per query head (parts_for): each takes 1 / parts_ of every K/V tile's keys in the
  // softmax steps and of head_dim in p x V; threads_ the workgroup's invocations, lane_keys_ each
  // lane's keys of a tile, part_dims_ a subgroup's 16-wide blocks of head_dim.
  const uint32_t parts_, threads_, lane_keys_, part_dims_;
  KernelBuilder k_;
  Buffer<u32> step_;
  Buffer<vec4> q_;
  Buffer<uvec4> k_cache_, v_cache_;
  Buffer<f32> partials_;
  Buffer<u32> counters_;
  Buffer<f32> out_;
  Expr<u32> n_;
  Shared<uvec4> stage_;
  Shared<f32> scores_;
  Shared<uvec4> probs_;
  Shared<u32> last_sh_;
  std::optional<Shared<f32>> stats_;  // with parts_ > 1: each part's (max, sum) of every row
  Expr<u32> lid_, kv_, head_, part_, lane_;
  Expr<u32> row_ = constant<u32>(0), half_ = constant<u32>(0), query_pos_ = constant<u32>(0), chunks_ = constant<u32>(0),
            active_ = constant<u32>(0), chunk_ = constant<u32>(0), key_at_ = constant<u32>(0);
};

}  // namespace

bool attention_prefill_coopmat_supported(const OpTarget& target, const AttentionDims& d) {
  return target.has_matrix_shape(kShape) && target.subgroup_size == kLanes && d.head_dim % 16 == 0 && d.head_dim > 0 &&
         d.n_kv_heads > 0 && d.n_heads % d.n_kv_heads == 0 && d.group() * kLanes <= target.max_workgroup_invocations &&
         shared_bytes(d) <= target.max_shared_bytes;
}

bool attention_prefill_coopmat_pays(const OpTarget& target, const AttentionDims& d, uint32_t n, uint32_t pos) {
  const Tuning& t = tuning_for(target);
  return attention_prefill_coopmat_supported(target, d) && pos >= t.prefill_coopmat_attention_from &&
         d.n_kv_heads * ceil_div(n, kTokens) >= t.prefill_coopmat_attention_workgroups;
}

dsl::Kernel attention_prefill_coopmat(const OpTarget& target, const AttentionDims& d, uint32_t context) {
  d.check("attention_prefill_coopmat");
  if (context == 0) throw std::invalid_argument("attention_prefill_coopmat: need context > 0");
  if (!attention_prefill_coopmat_supported(target, d))
    throw std::invalid_argument("attention_prefill_coopmat: the target needs the F16 16x16x16 cooperative-matrix shape, "
                                "subgroups of 32, a workgroup of a subgroup per query head of a KV head and " +
                                std::to_string(shared_bytes(d)) + " bytes of shared memory; head_dim " +
                                std::to_string(d.head_dim) + " must be a multiple of 16");
  return CoopAttention(target, d, context).build();
}

uint32_t attention_prefill_coopmat_chunks(const OpTarget& target, uint32_t n, uint32_t pos) {
  const uint32_t per = tuning_for(target).prefill_coopmat_attention_chunk_tiles;
  return per == 0 ? 1u : std::clamp(ceil_div(ceil_div(pos + n, kKeys), per), 1u, kMaxChunks);
}

std::array<uint32_t, 3> attention_prefill_coopmat_grid(const OpTarget& target, const AttentionDims& d, uint32_t n,
                                                       uint32_t chunks) {
  if (chunks == 0) chunks = attention_prefill_coopmat_chunks(target, n, 0);
  return {d.n_kv_heads * chunks, ceil_div(n, kTokens), 1};
}

uint64_t attention_prefill_coopmat_partials_bytes(const AttentionDims& d, uint32_t n, uint32_t chunks) {
  return 4ull * ceil_div(n, kTokens) * d.n_kv_heads * chunks * d.group() * kTokens * partial_words(d);
}

uint64_t attention_prefill_coopmat_counters_bytes(const AttentionDims& d, uint32_t n) {
  return 4ull * ceil_div(n, kTokens) * d.n_kv_heads;
}

Plan plan_attention_prefill_coopmat(const OpTarget& target, const AttentionDims& d, uint32_t context) {
  return {attention_prefill_coopmat(target, d, context), [target, d](uint32_t n) {
            const auto g = attention_prefill_coopmat_grid(target, d, n);
            return rt::Grid{g[0], g[1], g[2]};
          }};
}

}  // namespace bdsl::ops
