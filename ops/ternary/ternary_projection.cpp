// The ternary projection kernel body (norm prologue, row groups, epilogues) shared by the decode
// matvecs (ternary_matvec.h), the prefill matmul (ternary_matmul.h) and the fused decode layers
// (decode_layer.h): ternary_projection.h. The row dot products themselves: ternary_row_dots.h.
#include "ops/ternary/ternary_projection.h"


#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/attention/attention_split_kv.h"
#include "ops/common/matrix_support.h"
#include "ops/common/norm_scale.h"
#include "ops/common/quantize_activations.h"
#include "ops/common/step_state.h"
#include "ops/ternary/rope_kv_epilogue.h"
#include "ops/ternary/ternary_row_dots.h"


namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

using Combine = detail::ProjectionCombine;
using Tensor = detail::ProjectionTensor;
using detail::chunk_unroll;
using detail::declare_prefetch;
using detail::emit_row_dots;
using detail::emit_row_word_dots;
using detail::fill_prefetch;
using detail::kZeroQWords;
using detail::Prefetch;
using detail::QuadLoader;
using detail::swizzled_q_word;
using detail::TokenSlot;
using detail::WeightBuffer;

// Rows a subgroup takes at a time. A tensor boundary inside the grid (QKV) must not split a group.
uint32_t rows_per_subgroup(const std::string& what, const std::vector<Tensor>& tensors, Combine combine,
                           const MatvecOptions& o) {
  const uint32_t rs = std::max(1u, o.rows_per_subgroup);
  for (size_t t = 0; !combine && t + 1 < tensors.size(); ++t)
    if (tensors[t].rows % rs != 0)
      throw std::invalid_argument(what + ": rows_per_subgroup " + std::to_string(rs) + " does not divide the " +
                                  std::to_string(tensors[t].rows) + " rows of " + tensors[t].name);
  return rs;
}

std::string shape_suffix(const std::vector<Tensor>& tensors, uint32_t cols) {
  std::string s;
  for (const Tensor& t : tensors) s += "_" + std::to_string(t.rows);
  return s + "x" + std::to_string(cols);
}

void check_shapes(const std::string& what, const std::vector<Tensor>& tensors, uint32_t cols) {
  if (cols == 0 || cols % 128 != 0)
    throw std::invalid_argument(what + ": cols " + std::to_string(cols) + " is not a positive multiple of 128");
  for (const Tensor& t : tensors) {
    if (t.rows == 0) throw std::invalid_argument(what + ": tensor " + t.name + " has no rows");
    if (uint64_t(t.rows) * cols / 64 >= (1ull << 32))
      throw std::invalid_argument(what + ": tensor " + t.name + " is too large for 32-bit indices");
  }
}

// What both the standalone kernel and a phase of a fused one check and derive.
struct ProjectionPlan {
  bool packed, norm, batched, words;
  uint32_t wg, rs, rows_per_wg, chunks;
};

ProjectionPlan plan_projection(const OpTarget& target, const std::string& what, const std::vector<Tensor>& tensors,
                               uint32_t cols, Combine combine, const MatvecOptions& o, uint32_t tokens_per_wg,
                               const detail::RopeKvEpilogue* rope) {
  check_shapes(what, tensors, cols);
  if (rope && (o.rows_per_subgroup != 4 || o.add_residual || o.write_accumulators))
    throw std::invalid_argument(what + ": the RoPE epilogue takes 4 rows per subgroup, no residual or accumulators");
  const bool packed = o.dot == DotProduct::Auto ? target.int_dot_product : o.dot == DotProduct::Packed;
  // In the workgroup: int8 quantization of x (with the RMSNorm in front, NormalizeInWorkgroup).
  const bool norm = o.input != MatvecInput::Quantized;
  const bool batched = tokens_per_wg > 0;
  const uint32_t wg = ternary_matvec_workgroup(target, o);
  const uint32_t rs = rows_per_subgroup(what, tensors, combine, o);
  const uint32_t rows_per_wg = rows_per_workgroup(target, wg) * rs;
  const uint32_t chunks = cols / 64;
  // With the norm in the workgroup, each token of the tile has its own q words and reduction scratch.
  const uint32_t tile = batched ? tokens_per_wg : 1;
  const uint32_t staged = o.attention_partials && batched ? cols * 4 : 0;  // stride_order_squares' copy of x
  if (norm && tile * (cols + kZeroQWords * 4 + 3 * wg * 4) + staged > target.max_shared_bytes)
    throw std::invalid_argument(what + ": " + std::to_string(tile) + " x " + std::to_string(cols) +
                                " int8 activations and the reduction scratch do not fit in " +
                                std::to_string(target.max_shared_bytes) + " bytes of shared memory");
  // Word units (emit_row_word_dots) where every lane of every pass has a word of the row: one
  // token a workgroup (decode, or a batch in tiles of one token).
  const bool words = norm && tile == 1 && packed && target.subgroup_size_fixed &&
                     (cols / 16) % std::max(1u, target.subgroup_size) == 0;
  return {packed, norm, batched, words, wg, rs, rows_per_wg, chunks};
}

void emit_projection(const detail::ProjectionSite& site, const OpTarget& target, const std::string& what,
                     const std::vector<Tensor>& tensors, uint32_t cols, Combine combine, const MatvecOptions& o,
                     uint32_t tokens_per_wg, const detail::RopeKvEpilogue* rope, bool one_token_step) {
  const auto [packed, norm, batched, words, wg, rs, rows_per_wg, chunks] = plan_projection(target, what, tensors, cols, combine, o, tokens_per_wg, rope);
  const uint32_t units = words ? cols / 16 : chunks;  // a row's read units
  KernelBuilder& k = *site.k;
  // In a fused kernel other workgroups of the same dispatch write what this phase reads.
  auto activation = [&]<class T>(std::string n, Access access, T) {
    switch (site.sharing) {
      case detail::Sharing::Coherent: return k.coherent_buffer<T>(std::move(n), access);
      case detail::Sharing::Handoff: return k.handoff_buffer<T>(std::move(n), access);
      default: return k.buffer<T>(std::move(n), access);
    }
  };
  std::vector<WeightBuffer> w;
  for (const Tensor& t : tensors) {
    const std::string n = tensors.size() == 1 ? "w" : "w_" + t.name;
    if (words)
      w.push_back(k.buffer<u32>(n, Access::Read));
    else
      w.push_back(k.buffer<uvec4>(n, Access::Read));
  }
  std::optional<Buffer<uvec4>> x_q;
  std::optional<Buffer<u32>> x_act;
  std::optional<Buffer<f32>> x, norm_weight;
  if (norm) {
    x = activation("x", Access::Read, f32{});
    if (o.input == MatvecInput::NormalizeInWorkgroup) norm_weight = k.buffer<f32>("norm_weight", Access::Read);
  } else {
    x_q = activation("x_q", Access::Read, uvec4{});
    x_act = activation("x_act", Access::Read, u32{});
  }
  const Access out_access = o.add_residual ? Access::ReadWrite : Access::Write;
  std::vector<Buffer<f32>> y;
  std::optional<Buffer<u32>> step, k_cache, v_cache;
  std::optional<Buffer<vec2>> rope_table;
  std::optional<Buffer<f32>> y_q;
  if (rope) {
    // A batch's tokens: each its own sequence's record (ops/common/step_state.h).
    step = site.step ? *site.step : k.buffer<u32>(batched ? "sequences" : "step", Access::Read);
    rope_table = k.buffer<vec2>("rope_table", Access::Read);
    y_q = activation("y_q", Access::Write, f32{});
    k_cache = activation("k_cache", Access::Write, u32{});
    v_cache = activation("v_cache", Access::Write, u32{});
  } else if (combine || tensors.size() == 1)
    y.push_back(activation("y", out_access, f32{}));
  else
    for (const Tensor& t : tensors) y.push_back(activation("y_" + t.name, out_access, f32{}));
  std::vector<Buffer<i32>> accs;
  if (o.write_accumulators)
    for (const Tensor& t : tensors) accs.push_back(k.buffer<i32>("acc_" + t.name, Access::Write));
  // A batch in tiles of one token runs the decode body (weights prefetched before the norm
  // prologue, word units) for its token, read at an offset: the same int32 dots, the same bits.
  const bool one_token = !batched || tokens_per_wg == 1;
  // Attention's deferred partials (MatvecOptions::attention_partials): bound after the outputs.
  // In a batch attention_step holds the sequence records, and nothing writes attention_used.
  std::optional<Buffer<u32>> attn_step;
  std::optional<Buffer<vec2>> attn_partials;
  std::optional<Buffer<f32>> attn_used;
  if (o.attention_partials) {
    if (!norm || !one_token || site.sharing != detail::Sharing::None)
      throw std::invalid_argument(what + ": attention partials are the norm-fused input of a kernel of its own, one token a workgroup");
    attn_step = k.buffer<u32>("attention_step", Access::Read);
    attn_partials = k.buffer<vec2>("attention_partials", Access::Read);
    if (!batched) attn_used = k.buffer<f32>("attention_used", Access::Write);
  }
  std::optional<Expr<f32>> eps;
  if (norm_weight) eps = site.eps ? *site.eps : k.push<f32>("eps");
  std::optional<Expr<u32>> token_count;
  if (batched) token_count = k.push<u32>("tokens");
  // A tile of one token: the grid has a row per token (ternary_matmul_token_tiles), so every
  // workgroup's token exists and needs neither a clamp nor a guard. A kernel for steps of one
  // token has token 0 as a constant: the decode step's code (indexing by the grid's y cost the
  // one-lane bucket's ffn_down ~2.5% on the H200).
  std::optional<Expr<u32>> tile_token;
  if (batched && one_token) tile_token = one_token_step ? constant<u32>(0u) : let("tile_token", k.workgroup_id().y());
  // RoPE over a batch: each token's position and the cache row it writes (its sequence's first
  // row + pos); a token past the batch reads the last one's record (and writes nothing). A tile
  // of one token reads its record here, with the weights, so that the rotations' dependent loads
  // overlap the norm prologue as the decode step's do.
  std::vector<Expr<u32>> token_pos, token_cache_row;
  auto read_record = [&](Expr<u32> readable) {
    auto record = let("record", readable * kSequenceWords);
    token_pos.push_back(let("token_pos", Expr<u32>((*step)[record + kSequencePos])));
    token_cache_row.push_back(let("cache_row", Expr<u32>((*step)[record + kSequenceFirstRow]) + token_pos.back()));
  };
  if (rope && tile_token) read_record(*tile_token);

  std::vector<Expr<f32>> scales;
  for (size_t t = 0; t < tensors.size(); ++t)
    scales.push_back(let("scale_" + tensors[t].name,
                         bitcast<f32>(words ? Expr<u32>(std::get<Buffer<u32>>(w[t])[uint32_t(uint64_t(tensors[t].rows) * cols / 16)])
                                            : Expr<uvec4>(std::get<Buffer<uvec4>>(w[t])[uint32_t(uint64_t(tensors[t].rows) * cols / 64)]).x())));

  // RoPE's head kind (0 q, 1 k, 2 v) as an index into the tensors, which may start at k.
  std::vector<uint32_t> offsets{0};
  for (const Tensor& t : tensors) offsets.push_back(offsets.back() + t.rows);
  // Gate and up share their rows: a row of the grid is one row of both.
  const uint32_t total = combine ? tensors[0].rows : offsets.back();
  const uint32_t site_rows = site.rows_per_workgroup ? site.rows_per_workgroup : rows_per_wg;
  auto first = let("first_row", site.workgroup * site_rows);
  auto end = let("end_row", min(first + site_rows, total));
  // Each subgroup takes `rs` consecutive rows at a time (one activation load serves all of them);
  // a row past its tensor's end reads the last row (in range) and writes nothing.
  auto rows_of = [&](size_t t, Expr<u32> local0) {
    std::vector<Expr<u32>> bases;
    std::vector<std::optional<Expr<boolean>>> valid;
    for (uint32_t r = 0; r < rs; ++r) {
      auto local = r == 0 ? local0 : let("local_row" + std::to_string(r), local0 + r);
      const bool may_pass_end = tensors[t].rows % rs != 0;
      valid.push_back(may_pass_end ? std::optional<Expr<boolean>>(local < tensors[t].rows) : std::nullopt);
      auto readable = may_pass_end ? min(local, tensors[t].rows - 1) : local;
      bases.push_back(let("row_base" + std::to_string(r), readable * units));
    }
    return std::pair{bases, valid};
  };
  // Gate/up: a subgroup's rows of gate then of up, each row of both tensors at `bases`.
  auto gate_up_rows = [&](const std::vector<Expr<u32>>& bases) {
    std::pair<std::vector<WeightBuffer>, std::vector<Expr<u32>>> rows;
    for (size_t t = 0; t < 2; ++t)
      for (uint32_t r = 0; r < rs; ++r) {
        rows.first.push_back(w[t]);
        rows.second.push_back(bases[r]);
      }
    return rows;
  };
  // Decode: the first row group's first pass of weights (the first prefetch_passes row groups')
  // is loaded before the norm prologue (global loads do not move across its barriers on their own).
  const auto stride = k.num_subgroups() * rs;
  std::optional<Expr<u32>> row0;
  std::vector<Expr<u32>> pass_rows;  // each prefetched row group's first row
  std::vector<Prefetch> pres;
  std::vector<std::optional<std::pair<Expr<vec2>, Expr<vec2>>>> pass_rotations;
  for (uint32_t pass = 0; one_token && pass < std::max(1u, site.prefetch_passes); ++pass) {
    const std::string tag = pass ? std::to_string(pass) + "_" : "";
    if (pass == 0) row0 = let("row0", first + k.subgroup_id() * rs);
    pass_rows.push_back(pass == 0 ? *row0 : let("row_pass", *row0 + stride * pass));
    auto readable = let("row0_read", min(pass_rows.back(), constant<u32>((total - 1) / rs * rs)));
    const size_t weight_rows = rope ? 4 : combine ? 2 * rs : rs;
    pres.push_back(declare_prefetch(k, chunk_unroll(units, target.subgroup_size, 1), weight_rows, tag, words));
    Prefetch* pre = &pres.back();
    pass_rotations.emplace_back();
    if (rope) {
      if (!batched) pass_rotations.back() = rope_quad_rotations(*rope, readable, *step, *rope_table);
      else if (tile_token) pass_rotations.back() = rope_quad_rotations_at(*rope, readable, token_pos[0], *rope_table);
      rope_quad_rows(*rope, readable, [&](size_t t, const std::vector<Expr<u32>>& rows) {
        std::vector<Expr<u32>> bases;
        for (const auto& r : rows) bases.push_back(r * units);
        fill_prefetch(k, *pre, std::vector<WeightBuffer>(4, w[t]), bases, units);
      });
    } else if (combine) {
      const auto [ws, bases] = gate_up_rows(rows_of(0, readable).first);
      fill_prefetch(k, *pre, ws, bases, units);
    } else {
      std::function<void(size_t)> segment = [&](size_t t) {
        auto body = [&] {
          auto local0 = t == 0 ? readable : let("pre_local", readable - offsets[t]);
          fill_prefetch(k, *pre, std::vector<WeightBuffer>(rs, w[t]), rows_of(t, local0).first, units);
        };
        if (t + 1 == tensors.size())
          body();
        else
          if_(readable < offsets[t + 1], body).else_([&] { segment(t + 1); });
      };
      segment(0);
    }
  }

  // Everything above reads weights (and the step state) only.
  if (site.before_activations) site.before_activations();

  // The residual under the first row group, read now rather than after the dot products: its
  // memory round trip overlaps the norm prologue instead of lengthening the epilogue. Only this
  // invocation writes these elements, so the value is the one the epilogue would have read.
  std::vector<Expr<f32>> residual0;
  if (row0 && o.add_residual && !combine && tensors.size() == 1)
    for (uint32_t r = 0; r < rs; ++r) {
      auto at = min(*row0 + r, constant<u32>(total - 1));
      residual0.push_back(let("residual" + std::to_string(r), y[0][tile_token ? *tile_token * total + at : at]));
    }

  // The tokens of this workgroup, their activation scales s, sums of q and a loader of q.
  std::vector<TokenSlot> slots;
  std::vector<Expr<f32>> s;
  std::vector<Expr<i32>> q_sum;
  QuadLoader q;
  std::optional<uint32_t> zero_quad;  // with q in shared memory
  std::optional<Shared<u32>> q_shared;
  if (norm && !one_token) {
    // Each token of the tile as the one-token case below, all of them through each pass of the
    // quantizer together: its q words and kZeroQWords zeros in a region of its own, its scale and
    // sum of q from the same arithmetic as quantize_activations' (so a token's q is the same bits
    // whichever kernel quantized it).
    const uint32_t region = cols / 4 + kZeroQWords;
    auto q_words = k.shared<u32>("q_words", region * tokens_per_wg);
    q_shared = q_words;
    zero_quad = cols / 16;
    for (uint32_t t = 0; t < tokens_per_wg; ++t)
      for (uint32_t i = 0; i * wg < kZeroQWords; ++i) {
        auto at = let("zero_at", k.local_index() + i * wg);
        if_(at < kZeroQWords, [&] { q_words[at + t * region + cols / 4] = constant<u32>(0u); });
      }
    auto base = let("token_base", k.workgroup_id().y() * tokens_per_wg);
    std::vector<Expr<u32>> rows;
    std::vector<QuantizeBody> bodies;
    for (uint32_t t = 0; t < tokens_per_wg; ++t) {
      const std::string n = std::to_string(t);
      auto token = let("token" + n, base + t);
      slots.push_back({token, token < *token_count});
      // A token past the end quantizes the last token's row (never used): no read out of range.
      rows.push_back(let("x_row" + n, min(token, *token_count - 1u) * cols));
    }
    for (uint32_t t = 0; t < tokens_per_wg; ++t) {
      QuantizeBody body;
      body.dim = cols;
      body.workgroup = wg;
      body.load_x = [&, t](Expr<u32> i) { return Expr<f32>((*x)[rows[t] + i]); };
      if (norm_weight) body.load_norm_weight = [&](Expr<u32> i) { return Expr<f32>((*norm_weight)[i]); };
      body.eps = eps;
      body.norm_scale = norm_scale_mode(target, body.workgroup);
      body.store_q = [&, t](Expr<u32> word, Expr<u32> v) { q_words[word + t * region] = v; };
      bodies.push_back(std::move(body));
    }
    for (const QuantizedTotals& totals : emit_quantize_activations(k, bodies)) {  // ends with a barrier
      s.push_back(totals.scale);
      q_sum.push_back(totals.sum);
    }
    q = [q_words, base, region](Expr<u32> token, Expr<u32> i) {
      auto b = (token - base) * region + i * 4u;
      return make_vec<u32>(q_words[b], q_words[b + 1u], q_words[b + 2u], q_words[b + 3u]);
    };
  } else if (norm) {
    // The q words, then kZeroQWords zeros: quads cols / 16 + 0, 2, 4, 6 (zero_quad) read zeros, so
    // a lane's chunk past the row's end counts 0 without a select per row.
    auto q_words = k.shared<u32>("q_words", cols / 4 + (words ? 0 : kZeroQWords));
    q_shared = q_words;
    if (!words) {
      zero_quad = cols / 16;
      for (uint32_t i = 0; i * wg < kZeroQWords; ++i) {
        auto at = let("zero_at", k.local_index() + i * wg);
        if_(at < kZeroQWords, [&] { q_words[at + cols / 4] = constant<u32>(0u); });
      }
    }
    QuantizeBody body;
    body.dim = cols;
    body.workgroup = wg;
    body.load_x = [&](Expr<u32> i) { return Expr<f32>((*x)[tile_token ? *tile_token * cols + i : i]); };
    if (norm_weight) body.load_norm_weight = [&](Expr<u32> i) { return Expr<f32>((*norm_weight)[i]); };
    if (o.attention_partials) {
      body.load_word = attention_word_loader(k, *o.attention_partials, *x, *attn_step, *attn_partials, attn_used, site.workgroup, wg,
                                             tile_token);
      // A batch's bucket must give the bits of the others, which quantize in their own kernel.
      body.stride_order_squares = batched;
    }
    body.eps = eps;
    body.norm_scale = norm_scale_mode(target, body.workgroup);
    body.store_q = [&](Expr<u32> word, Expr<u32> v) { q_words[words ? swizzled_q_word(word) : word] = v; };
    const QuantizedTotals totals = emit_quantize_activations(k, body);  // ends with a barrier
    slots.push_back({tile_token ? *tile_token : constant<u32>(0u), std::nullopt});
    s.push_back(totals.scale);
    q_sum.push_back(totals.sum);
    q = [q_words](Expr<u32>, Expr<u32> i) {
      auto b = i * 4u;
      return make_vec<u32>(q_words[b], q_words[b + 1u], q_words[b + 2u], q_words[b + 3u]);
    };
  } else {
    const uint32_t tokens_here = batched ? tokens_per_wg : 1;
    for (uint32_t i = 0; i < tokens_here; ++i) {
      const std::string n = std::to_string(i);
      if (!batched) {
        slots.push_back({constant<u32>(0u), std::nullopt});
      } else {
        auto token = let("token" + n, k.workgroup_id().y() * tokens_per_wg + i);
        slots.push_back({token, token < *token_count});
      }
      // A token past the end reads the last token's scale (never used): no read out of range.
      auto readable = batched ? let("act_token" + n, min(slots.back().token, *token_count - 1u)) : constant<u32>(0u);
      s.push_back(let("act_scale" + n, bitcast<f32>(Expr<u32>((*x_act)[readable * 2u]))));
      q_sum.push_back(let("q_sum" + n, bitcast<i32>(Expr<u32>((*x_act)[readable * 2u + 1u]))));
    }
    q = [&](Expr<u32> token, Expr<u32> i) { return Expr<uvec4>((*x_q)[token * (cols / 16) + i]); };
  }
  if (rope && batched && !tile_token)
    for (const TokenSlot& slot : slots) read_record(min(slot.token, *token_count - 1u));
  auto lane0 = k.subgroup_invocation() == 0u;
  auto project = [&](Expr<i32> dot, size_t t, size_t slot) {
    return cast<f32>(dot - q_sum[slot]) / s[slot] * scales[t];
  };
  // `residual`: the element already read (residual0), or none.
  auto store = [&](const Buffer<f32>& out, Expr<u32> i, Expr<f32> v, const Expr<f32>* residual = nullptr) {
    if (o.add_residual)
      out[i] = (residual ? *residual : Expr<f32>(out[i])) + v;
    else
      out[i] = v;
  };
  // Writes of token slot `slot` happen in lane 0 and only for tokens that exist.
  auto write_guard = [&](size_t slot, const std::function<void()>& body) {
    if_(slots[slot].valid ? lane0 && *slots[slot].valid : lane0, body);
  };
  // Outputs are token-major: token t's vector of `rows` values starts at t * rows.
  auto out_index = [&](size_t slot, Expr<u32> local, uint32_t rows) {
    return batched ? slots[slot].token * rows + local : local;
  };

  auto row_dots = [&](const std::vector<WeightBuffer>& ws, const std::vector<Expr<u32>>& bases, const Prefetch* p) {
    return words ? emit_row_word_dots(k, ws, bases, units, *q_shared, target, p)
                 : emit_row_dots(k, ws, bases, chunks, slots, q, packed, target, p, zero_quad);
  };
  auto row_group = [&](Expr<u32> row, const Prefetch* p,
                       std::optional<std::pair<Expr<vec2>, Expr<vec2>>> rotations = std::nullopt) {
    auto guarded = [&](size_t slot, const std::optional<Expr<boolean>>& row_valid, const std::function<void()>& body) {
      if (row_valid)
        write_guard(slot, [&] { if_(*row_valid, body); });
      else
        write_guard(slot, body);
    };
    if (rope) {
      // The quad's four values for every token of the workgroup: [token][row].
      auto project_quad = [&](size_t t, const std::vector<Expr<u32>>& rows) {
        std::vector<Expr<u32>> bases;
        for (const auto& r : rows) bases.push_back(r * units);
        auto dots = row_dots(std::vector<WeightBuffer>(4, w[t]), bases, p);
        std::vector<std::vector<Expr<f32>>> v(slots.size());
        for (uint32_t r = 0; r < 4; ++r)
          for (size_t i = 0; i < slots.size(); ++i) v[i].push_back(let("proj", project(dots[r][i], t, i)));
        return v;
      };
      if (!batched) {
        emit_rope_kv_quad(*rope, row, [&](size_t t, const std::vector<Expr<u32>>& rows) { return project_quad(t, rows)[0]; },
                          *step, *rope_table, y_q, k_cache, v_cache, lane0, rotations);
        return;
      }
      std::vector<detail::RopeToken> toks;
      for (size_t i = 0; i < slots.size(); ++i)
        toks.push_back({token_pos[i], token_cache_row[i], let("q_base", slots[i].token * rope->dims.q_width()), slots[i].valid,
                        rotations ? *rotations : rope_quad_rotations_at(*rope, row, token_pos[i], *rope_table)});
      emit_rope_kv_quad_tokens(*rope, row, project_quad, toks, y_q, k_cache, v_cache, lane0);
      return;
    }
    if (combine) {
      auto [bases, valid] = rows_of(0, row);
      const auto [ws, all_bases] = gate_up_rows(bases);
      auto dots = row_dots(ws, all_bases, p);
      for (uint32_t r = 0; r < rs; ++r)
        for (size_t i = 0; i < slots.size(); ++i) {
          const auto& dg = dots[r][i];
          const auto& du = dots[rs + r][i];
          auto gate = let("gate", project(dg, 0, i));
          auto up = let("up", project(du, 1, i));
          auto product = let("gate_product", gate_product(*combine, gate, up));
          guarded(i, valid[r], [&] {
            auto at = out_index(i, row + r, tensors[0].rows);
            store(y[0], at, product);
            if (o.write_accumulators) {
              accs[0][at] = dg - q_sum[i];
              accs[1][at] = du - q_sum[i];
            }
          });
        }
      return;
    }
    std::function<void(size_t)> segment = [&](size_t t) {
      auto body = [&] {
        auto local0 = t == 0 ? row : let("local_row", row - offsets[t]);
        auto [bases, valid] = rows_of(t, local0);
        auto dots = row_dots(std::vector<WeightBuffer>(rs, w[t]), bases, p);
        for (uint32_t r = 0; r < rs; ++r)
          for (size_t i = 0; i < slots.size(); ++i) {
            auto v = let("proj", project(dots[r][i], t, i));
            guarded(i, valid[r], [&] {
              auto at = out_index(i, local0 + r, tensors[t].rows);
              store(y[y.size() == 1 ? 0 : t], at, v, !pres.empty() && p == &pres.front() && !residual0.empty() ? &residual0[r] : nullptr);
              if (o.write_accumulators) accs[t][at] = dots[r][i] - q_sum[i];
            });
          }
      };
      if (t + 1 == tensors.size())
        body();
      else
        if_(row < offsets[t + 1], body).else_([&] { segment(t + 1); });
    };
    segment(0);
  };
  if (row0) {
    for (size_t pass = 0; pass < pres.size(); ++pass)
      if_(pass_rows[pass] < end, [&] { row_group(pass_rows[pass], &pres[pass], pass_rotations[pass]); });
    // Where the site's rows take more passes than it prefetches, or the device runs a larger
    // subgroup than the target's (fewer subgroups).
    const bool covered = target.subgroup_size_fixed && site_rows <= pres.size() * rows_per_wg;
    if (!covered)
      for_range(*row0 + stride * static_cast<uint32_t>(pres.size()), end, stride, [&](Expr<u32> row) { row_group(row, nullptr); }, "row");
  } else {
    for_range(first + k.subgroup_id() * rs, end, stride, [&](Expr<u32> row) { row_group(row, nullptr); }, "row");
  }
}

}  // namespace

Kernel detail::build_ternary_projection(const OpTarget& target, const std::string& what,
                                        const std::vector<Tensor>& tensors, uint32_t cols, Combine combine,
                                        const MatvecOptions& o, uint32_t tokens_per_wg, const detail::RopeKvEpilogue* rope,
                                        bool one_token_step) {
  const auto [packed, norm, batched, words, wg, rs, rows_per_wg, chunks] = plan_projection(target, what, tensors, cols, combine, o, tokens_per_wg, rope);
  if (one_token_step && tokens_per_wg != 1) throw std::invalid_argument(what + ": a kernel for steps of one token takes tiles of one");

  std::string name = what + (rope ? "_rope" : "") + (packed ? "_sdot" : "_int") + (o.input == MatvecInput::NormalizeInWorkgroup ? "_normed" : norm ? "_quantizing" : "") +
                     (o.add_residual ? "_residual" : "") + (o.write_accumulators ? "_acc" : "") + (o.attention_partials && batched ? "_merging" : "") +
                     (rs > 1 ? "_r" + std::to_string(rs) : "") + (o.workgroup ? "_w" + std::to_string(wg) : "") + (one_token_step ? "_one" : batched ? "_t" + std::to_string(tokens_per_wg) : "") + shape_suffix(tensors, cols);
  KernelBuilder k(name, {wg, 1, 1});
  emit_projection({&k, k.workgroup_id().x()}, target, what, tensors, cols, combine, o, tokens_per_wg, rope, one_token_step);
  return k.build();
}

void detail::emit_ternary_projection(const ProjectionSite& site, const OpTarget& target, const std::string& what,
                                     const std::vector<ProjectionTensor>& tensors, uint32_t cols, ProjectionCombine combine,
                                     const MatvecOptions& o, const RopeKvEpilogue* rope) {
  emit_projection(site, target, what, tensors, cols, combine, o, 0, rope, false);
}

}  // namespace bdsl::ops
