// attn_output's side of decode attention's deferred combine (ops/attention/attention_split_kv.h,
// attention_word_loader): the words of attention's output, merged from its partials.
#include <cmath>
#include <stdexcept>

#include "ops/attention/attention_merge.h"
#include "ops/attention/attention_split_kv.h"
#include "ops/common/step_state.h"

namespace bdsl::ops {
using namespace bdsl::dsl;
using detail::MergeState;
using detail::merge_round;

namespace {
constexpr float kLowest = detail::kAttentionLowest;
}  // namespace

// Word w (elements 4w .. 4w + 3) of decode attention's output: read from x at once (attention
// wrote it unless it deferred), and where the position says attention left the combine, merged
// from the partials of chunks 0 .. defer - 1 in one round of attention's own merge (merge_round;
// chunks not in use read the last one and weigh 0). With the current position, attention's
// partials (its chunks', or its own combine's in slot `chunks`) are merged in the same round
// with position pos: weight 1 at its score, the value row from the cache.
std::function<std::array<Expr<f32>, 4>(Expr<u32>)> attention_word_loader(KernelBuilder& k, const AttentionPartialsInput& a,
                                                                         const Buffer<f32>& x,
                                                                         const Buffer<u32>& step, const Buffer<vec2>& partials,
                                                                         const Buffer<f32>& used, Expr<u32> workgroup,
                                                                         const std::optional<AttentionCurrentPosition>& current,
                                                                         uint32_t target_subgroup, uint32_t workgroup_size) {
  const uint32_t hd = a.dims.head_dim, group = a.dims.group(), pairs = group * hd / 2;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (a.current_position != current.has_value()) throw std::logic_error("attention_word_loader: current position bindings");
  KernelBuilder* kb = &k;
  const uint32_t slots = a.chunks + (current ? 1 : 0);
  std::optional<Expr<u32>> pos, has_prev_u;
  std::optional<Shared<f32>> scores;
  Expr<u32> last = constant<u32>(0u);
  // Where a subgroup is exactly one head's words (a head of 128 on a 32-wide subgroup), each
  // lane's four elements of q . k summed over the subgroup give the head's score inside the
  // loader, with no round of its own; elsewhere (or where the device runs another subgroup size
  // than the target's) a round before it puts every head's score in shared memory.
  const bool by_subgroup = current && target_subgroup * 4 == hd && workgroup_size % target_subgroup == 0;
  std::optional<Expr<boolean>> subgroup_fits;
  // Where KV head kv's row at pos starts in the cache (F16 pairs), and acc plus q's pair at q_at
  // (pre-scaled as attention scales it) dotted with the cached pair key_word: the score's terms.
  std::function<Expr<u32>(Expr<u32>)> cache_row;
  std::function<Expr<f32>(Expr<f32>, Expr<u32>, Expr<u32>)> score_term;
  if (current) {
    pos = let("attn_pos", min(Expr<u32>(step[kStepPos]), constant<u32>(a.context - 1)));
    cache_row = [=](Expr<u32> kv) { return *pos * a.dims.kv_words() + kv * (hd / 2); };
    score_term = [=](Expr<f32> acc, Expr<u32> q_at, Expr<u32> key_word) {
      auto key = unpack_half2x16(Expr<u32>(current->k_cache[key_word]));
      return fma(Expr<f32>(current->q[q_at + 1u]) * scale, key.y(), acc + Expr<f32>(current->q[q_at]) * scale * key.x());
    };
    if (by_subgroup) subgroup_fits = let("attn_subgroup_fits", k.subgroup_size() == target_subgroup);
    // Every head's score at pos: a subgroup per head.
    scores = k.shared<f32>("attn_current_scores", a.dims.n_heads);
    auto score_round = [&] {
      for_range(k.subgroup_id(), constant<u32>(a.dims.n_heads), k.num_subgroups(), [&](Expr<u32> h) {
        auto partial = k.var<f32>("attn_score_part", 0.0f);
        auto row = let("attn_key_row", cache_row(h / group));
        for_range(k.subgroup_invocation(), constant<u32>(hd / 2), k.subgroup_size(), [&](Expr<u32> j) {
          partial = score_term(partial, h * hd + 2u * j, row + j);
        }, "attn_j");
        auto total = let("attn_score", subgroup_add(Expr<f32>(partial)));
        if_(k.subgroup_invocation() == 0u, [&] { (*scores)[h] = total; });
      }, "attn_h");
      barrier();
    };
    if (by_subgroup)
      if_(!*subgroup_fits, score_round);  // uniform: the barrier stays legal
    else
      score_round();
    has_prev_u = let("attn_has_prev", select(*pos > 0u, 1u, 0u));
    last = max(*pos, constant<u32>(1u)) - 1u;
  } else {
    last = min(Expr<u32>(step[kStepPos]), constant<u32>(a.context - 1));
  }
  auto active = let("attn_active", attention_active_chunks(last, a.pass, a.chunks));
  auto deferred = let("deferred", current ? active <= a.defer : active > 1u && active <= a.defer);
  return [=](Expr<u32> word) {
    auto e0 = let("attn_e0", word * 4u);
    std::vector<Var<f32>> v;
    // Attention's own output, read at once: where it is the answer, no wait for the position.
    for (uint32_t j = 0; j < 4; ++j) v.push_back(kb->var<f32>("attn_v", current ? constant<f32>(0.0f) : Expr<f32>(x[e0 + j])));
    auto merge = [&] {
      auto head = let("attn_head", e0 / hd);
      auto kv = head / group;
      auto g = let("attn_g", head % group);
      auto p0 = let("attn_pair", (e0 % hd) / 2u);
      std::vector<Expr<boolean>> valid;
      std::vector<Expr<vec2>> stats;
      std::vector<std::vector<Expr<vec2>>> parts(2);
      for (uint32_t c = 0; c < a.defer; ++c) {
        // Chunk c where they are deferred; otherwise attention's own combine, in slot `chunks`.
        Expr<u32> chunk = min(Expr<u32>(active) - 1u, constant<u32>(c));
        Expr<boolean> in_use = active > c;
        if (current) {
          chunk = select(deferred, chunk, constant<u32>(a.chunks));
          in_use = *has_prev_u == 1u && select(deferred, active > c, constant<boolean>(c == 0));
        }
        auto block = let("attn_block", partials_block(a.dims, slots, constant<u32>(0u), kv, chunk));
        valid.push_back(in_use);
        stats.push_back(let("attn_stats", Expr<vec2>(partials[block + pairs + g])));
        for (uint32_t p = 0; p < 2; ++p) {
          Expr<vec2> o = partials[block + g * (hd / 2) + p0 + p];
          // At pos 0 no chunk exists and the slot read may never have been written: weight 0
          // times a stale NaN is NaN.
          if (current) o = select(in_use, o, make_vec<f32>(0.0f, 0.0f));
          parts[p].push_back(let("attn_o", o));
        }
      }
      if (current) {
        valid.push_back(constant<boolean>(true));
        // This word's two pairs in the K and V rows at pos.
        auto row = let("attn_row_now", cache_row(kv) + p0);
        Expr<f32> score = (*scores)[head];
        if (by_subgroup)
          score = select(*subgroup_fits, subgroup_add(score_term(score_term(constant<f32>(0.0f), e0, row), e0 + 2u, row + 1u)), score);
        stats.push_back(make_vec<f32>(let("attn_score_now", score), constant<f32>(1.0f)));
        for (uint32_t p = 0; p < 2; ++p) parts[p].push_back(let("attn_v_now", unpack_half2x16(Expr<u32>(current->v_cache[row + p]))));
      }
      const auto zero = make_vec<f32>(0.0f, 0.0f);
      const MergeState merged = merge_round({constant<f32>(kLowest), constant<f32>(0.0f), {zero, zero}}, valid, stats, parts);
      auto total = let("attn_total", merged.total);
      auto c0 = let("attn_c0", merged.pairs[0] / make_vec<f32>(total, total));
      auto c1 = let("attn_c1", merged.pairs[1] / make_vec<f32>(total, total));
      v[0] = c0.x();
      v[1] = c0.y();
      v[2] = c1.x();
      v[3] = c1.y();
    };
    if (current)
      merge();
    else
      if_(deferred, merge);
    // Workgroup 0 leaves the vector it used where dumps and checks can read it. An invocation
    // past the last word loads the last word again: only that word's own invocation writes it
    // (a score summed over a subgroup of such copies is not the word's).
    const uint32_t last_word = a.dims.q_width() / 4 - 1;
    Expr<boolean> writes = workgroup == 0u;
    if (workgroup_size) writes = writes && (word != last_word || kb->local_index() == last_word % workgroup_size);
    if_(writes, [&] {
      for (uint32_t j = 0; j < 4; ++j) used[e0 + j] = v[j];
    });
    return std::array<Expr<f32>, 4>{Expr<f32>(v[0]), Expr<f32>(v[1]), Expr<f32>(v[2]), Expr<f32>(v[3])};
  };
}

}  // namespace bdsl::ops
