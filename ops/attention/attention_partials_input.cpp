// attn_output's side of decode attention's deferred combine (ops/attention/attention_split_kv.h,
// attention_word_loader): the words of attention's output, merged from its partials.
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
// chunks not in use read the last one and weigh 0). A batch's token reads its own record (whose
// pos is word kStepPos too), its own row of x and its own partials.
std::function<std::array<Expr<f32>, 4>(Expr<u32>)> attention_word_loader(KernelBuilder& k, const AttentionPartialsInput& a,
                                                                         const Buffer<f32>& x,
                                                                         const Buffer<u32>& step, const Buffer<vec2>& partials,
                                                                         const std::optional<Buffer<f32>>& used, Expr<u32> workgroup,
                                                                         uint32_t workgroup_size, std::optional<Expr<u32>> token) {
  const uint32_t hd = a.dims.head_dim, group = a.dims.group(), pairs = group * hd / 2;
  KernelBuilder* kb = &k;
  const Expr<u32> t = token ? *token : constant<u32>(0u);
  const Expr<u32> x_row = token ? let("attn_x_row", *token * a.dims.q_width()) : constant<u32>(0u);
  const Expr<u32> last =
      min(Expr<u32>(step[token ? *token * kSequenceWords + kSequencePos : constant<u32>(kStepPos)]), constant<u32>(a.context - 1));
  auto active = let("attn_active", attention_active_chunks(last, a.pass, a.chunks));
  auto deferred = let("deferred", active > 1u && active <= a.defer);
  return [=](Expr<u32> word) {
    auto e0 = let("attn_e0", word * 4u);
    std::vector<Var<f32>> v;
    // Attention's own output, read at once: where it is the answer, no wait for the position.
    for (uint32_t j = 0; j < 4; ++j) v.push_back(kb->var<f32>("attn_v", Expr<f32>(x[x_row + e0 + j])));
    auto merge = [&] {
      auto head = let("attn_head", e0 / hd);
      auto kv = head / group;
      auto g = let("attn_g", head % group);
      auto p0 = let("attn_pair", (e0 % hd) / 2u);
      std::vector<Expr<boolean>> valid;
      std::vector<Expr<vec2>> stats;
      std::vector<std::vector<Expr<vec2>>> parts(2);
      for (uint32_t c = 0; c < a.defer; ++c) {
        Expr<u32> chunk = min(Expr<u32>(active) - 1u, constant<u32>(c));
        Expr<boolean> in_use = active > c;  // built before the block: the GLSL keeps its order
        auto block = let("attn_block", partials_block(a.dims, a.chunks, t, kv, chunk));
        valid.push_back(in_use);
        stats.push_back(let("attn_stats", Expr<vec2>(partials[block + pairs + g])));
        for (uint32_t p = 0; p < 2; ++p) parts[p].push_back(let("attn_o", Expr<vec2>(partials[block + g * (hd / 2) + p0 + p])));
      }
      const auto zero = make_vec<f32>(0.0f, 0.0f);
      const MergeState merged = merge_round({constant<f32>(kLowest), constant<f32>(0.0f), {zero, zero}}, valid, stats, parts);
      auto total = let("attn_total", merged.total);
      auto c0 = let_precise("attn_c0", merged.pairs[0] / make_vec<f32>(total, total));
      auto c1 = let_precise("attn_c1", merged.pairs[1] / make_vec<f32>(total, total));
      v[0] = c0.x();
      v[1] = c0.y();
      v[2] = c1.x();
      v[3] = c1.y();
    };
    if_(deferred, merge);
    if (!used) return std::array<Expr<f32>, 4>{Expr<f32>(v[0]), Expr<f32>(v[1]), Expr<f32>(v[2]), Expr<f32>(v[3])};
    // Workgroup 0 leaves the vector it used where dumps and checks can read it. An invocation
    // past the last word loads the last word again: only that word's own invocation writes it.
    const uint32_t last_word = a.dims.q_width() / 4 - 1;
    Expr<boolean> writes = workgroup == 0u;
    if (workgroup_size) writes = writes && (word != last_word || kb->local_index() == last_word % workgroup_size);
    if_(writes, [&] {
      for (uint32_t j = 0; j < 4; ++j) (*used)[e0 + j] = v[j];
    });
    return std::array<Expr<f32>, 4>{Expr<f32>(v[0]), Expr<f32>(v[1]), Expr<f32>(v[2]), Expr<f32>(v[3])};
  };
}

}  // namespace bdsl::ops
