#include "ops/common/quantize_activations.h"

#include <algorithm>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/common/exact_division.h"
#include "ops/common/matrix_support.h"
#include "ops/common/norm_scale.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

// 256 invocations: 1024 was slower (bench/RESULTS.md, "Behind the code"), the extra subgroup partials outweighing
// the shorter passes.
uint32_t quantize_activations_workgroup(const OpTarget& target, const QuantizeOptions& options) {
  if (options.workgroup == 0) return subgroup_multiple_workgroup(target, 256);
  if (options.workgroup > target.max_workgroup_invocations || options.workgroup % std::max(1u, target.subgroup_size) != 0)
    throw std::invalid_argument("quantize_activations: workgroup " + std::to_string(options.workgroup) +
                                " is not whole subgroups within the device's limit");
  return options.workgroup;
}

// Every invocation takes the words lid, lid + w, ... (written out, not a loop: all its loads are
// issued at once and the values stay in registers for the three passes). The looped form pays
// a memory round trip per element per pass. Several tokens go through each pass together, with
// one barrier a pass for all of them; each token's arithmetic, and so its bits, is the one it
// has alone.
std::vector<QuantizedTotals> emit_quantize_activations(KernelBuilder& k, std::span<const QuantizeBody> bodies) {
  if (bodies.empty()) throw std::invalid_argument("emit_quantize_activations: no token");
  const QuantizeBody& b0 = bodies[0];
  for (const QuantizeBody& b : bodies)
    if (b.dim != b0.dim || b.workgroup != b0.workgroup || bool(b.load_norm_weight) != bool(b0.load_norm_weight) ||
        b.norm_scale != b0.norm_scale || (bodies.size() > 1 && b.load_word))
      throw std::invalid_argument("emit_quantize_activations: tokens quantized together need one shape and norm, and load_x");
  const uint32_t w = b0.workgroup;
  const uint32_t words = b0.dim / 4;
  const uint32_t per = (words + w - 1) / w;
  const size_t n = bodies.size();
  auto lid = k.local_index();
  const bool norm = static_cast<bool>(b0.load_norm_weight);

  struct Slot {
    Expr<u32> word;
    std::optional<Expr<boolean>> valid;  // empty: always in range
    std::vector<std::vector<Expr<f32>>> x;  // [token][element of the word]
    std::vector<Expr<f32>> g;            // the norm weight (the same for every token)
  };
  std::vector<Slot> slots;
  for (uint32_t u = 0; u < per; ++u) {
    Slot s{let("word" + std::to_string(u), lid + u * w), std::nullopt, {}, {}};
    const bool may_pass = (u + 1) * w > words;
    if (may_pass) s.valid = let("in_range" + std::to_string(u), s.word < words);
    auto readable = may_pass ? min(s.word, constant<u32>(words - 1)) : s.word;
    for (const QuantizeBody& b : bodies) {
      std::optional<std::array<Expr<f32>, 4>> word;
      if (b.load_word) word = b.load_word(readable);
      s.x.emplace_back();
      for (uint32_t j = 0; j < 4; ++j) s.x.back().push_back(let("xv", word ? (*word)[j] : b.load_x(readable * 4u + j)));
    }
    for (uint32_t j = 0; norm && j < 4; ++j) s.g.push_back(let("gv", b0.load_norm_weight(readable * 4u + j)));
    slots.push_back(std::move(s));
  }
  // A word past the end counts as zeros.
  auto masked = [](const Slot& s, Expr<f32> v) { return s.valid ? select(*s.valid, v, constant<f32>(0.0f)) : v; };

  std::vector<Expr<f32>> inv_rms;
  if (norm) {
    // The sum of squares takes elements lid, lid + w, ... in that order (its own loads, issued
    // with the others): the summation order, so the norm's bits, stay those the golden data
    // was validated with. Reordering it can move an int8 across a rounding boundary.
    // Each token's squares in that order, summed in f32 or, for ggml's scale, in f64
    // (ops/common/norm_scale.h).
    std::vector<SquareSum> sums;
    std::vector<Expr<f32>> eps;
    for (size_t t = 0; t < n; ++t) {
      const QuantizeBody& b = bodies[t];
      SquareSum& sum = sums.emplace_back(b0.norm_scale);
      eps.push_back(*b.eps);
      std::function<Expr<f32>(Expr<u32>)> load_x = b.load_x;
      if (b.load_word && b.stride_order_squares) {
        auto staged = k.shared<f32>("staged_x", b.dim);
        for (const Slot& s : slots) {
          auto stage = [&] {
            for (uint32_t j = 0; j < 4; ++j) staged[s.word * 4u + j] = s.x[t][j];
          };
          if (s.valid) {
            if_(*s.valid, stage);
          } else {
            stage();
          }
        }
        barrier();
        load_x = [staged](Expr<u32> i) { return Expr<f32>(staged[i]); };
      }
      const bool word_order = b.load_word && !b.stride_order_squares;
      if (word_order)
        for (const Slot& s : slots)
          for (uint32_t j = 0; j < 4; ++j) sum.add(masked(s, s.x[t][j]));
      for (uint32_t u = 0; !word_order && u * w < b.dim; ++u) {
        auto i = lid + u * w;
        const bool may_pass = (u + 1) * w > b.dim;
        auto xv = let("xs", load_x(may_pass ? min(i, constant<u32>(b.dim - 1)) : i));
        sum.add(may_pass ? select(i < b.dim, xv, constant<f32>(0.0f)) : xv);
      }
    }
    inv_rms = rms_inverses(k, w, b0.dim, sums, eps);
  }
  std::vector<std::vector<std::vector<Expr<f32>>>> values(n);  // [token][slot][element]
  std::vector<Expr<f32>> local_max;
  for (size_t t = 0; t < n; ++t) {
    std::optional<Expr<f32>> m;
    for (const Slot& s : slots) {
      values[t].emplace_back();
      for (uint32_t j = 0; j < 4; ++j) {
        auto v = let("v", norm ? (s.x[t][j] * inv_rms[t]) * s.g[j] : s.x[t][j]);
        values[t].back().push_back(v);
        auto a = masked(s, abs(v));
        m = m ? max(*m, a) : a;
      }
    }
    local_max.push_back(let("local_absmax", *m));
  }
  const auto absmax = workgroup_max_each<f32>(k, scratch_each<f32>(k, n, w, "absmax_parts"), local_max, "absmax");
  // Exactly golden's 127 / max(absmax, 1e-5) on every device (see divide_correctly_rounded).
  std::vector<Expr<f32>> scales;
  for (size_t t = 0; t < n; ++t)
    scales.push_back(let("act_scale", divide_correctly_rounded(k, constant<f32>(127.0f), max(absmax[t], 1e-5f))));

  // q = roundEven(v * s) needs no clamp to [-128, 127] here (docs/format.md's formula has one): |v| <=
  // absmax for these very values and s = 127 / absmax correctly rounded, so |v * s| <= 127 (1 +
  // 2^-24) rounds to at most 127 + 1 ulp and then to 127 (and below absmax 1e-5, |v * s| < 127).
  // The same q for every finite input; the two comparisons an element cost 1.9% of decode
  // (bench/RESULTS.md run 10).
  std::vector<Expr<i32>> local_sums;
  for (size_t t = 0; t < n; ++t) {
    const QuantizeBody& b = bodies[t];
    std::optional<Expr<i32>> local_sum;
    for (size_t u = 0; u < slots.size(); ++u) {
      const Slot& s = slots[u];
      std::vector<Expr<i32>> q;
      for (uint32_t j = 0; j < 4; ++j)
        q.push_back(let("q" + std::to_string(j), cast<i32>(round(values[t][u][j] * scales[t]))));
      auto word = let("q_word", pack_i8x4(make_vec<i32>(q[0], q[1], q[2], q[3])));
      auto word_sum = (q[0] + q[1]) + (q[2] + q[3]);
      word_sum = s.valid ? select(*s.valid, word_sum, constant<i32>(0)) : word_sum;
      local_sum = local_sum ? *local_sum + word_sum : word_sum;
      auto store = [&] {
        if (b.store_normalized)
          for (uint32_t j = 0; j < 4; ++j) b.store_normalized(s.word * 4u + j, values[t][u][j]);
        b.store_q(s.word, word);
      };
      if (s.valid)
        if_(*s.valid, store);
      else
        store();
    }
    local_sums.push_back(let("local_q_sum", *local_sum));
  }
  const auto sums = workgroup_add_each<i32>(k, scratch_each<i32>(k, n, w, "q_sum_parts"), local_sums, "q_sum");
  std::vector<QuantizedTotals> out;
  for (size_t t = 0; t < n; ++t) out.push_back({scales[t], sums[t]});
  return out;
}

QuantizedTotals emit_quantize_activations(KernelBuilder& k, const QuantizeBody& body) {
  return emit_quantize_activations(k, std::span<const QuantizeBody>(&body, 1))[0];
}

void emit_token_quantize(KernelBuilder& k, QuantizeBody body, const Buffer<u32>& q, const Buffer<u32>& act, Expr<u32> token) {
  auto q_base = let("q_base", token * (body.dim / 4));
  body.store_q = [&](Expr<u32> word, Expr<u32> packed) { q[q_base + word] = packed; };
  const QuantizedTotals totals = emit_quantize_activations(k, body);
  if_(k.local_index() == 0u, [&] {
    act[token * 2u] = bitcast<u32>(totals.scale);
    act[token * 2u + 1u] = bitcast<u32>(totals.sum);
  });
}

Kernel quantize_activations(const OpTarget& target, uint32_t dim, QuantizeOptions options) {
  if (dim == 0 || dim % 4 != 0)
    throw std::invalid_argument("quantize_activations: dim " + std::to_string(dim) + " is not a multiple of 4");
  const uint32_t w = quantize_activations_workgroup(target, options);
  std::string name = options.rms_norm ? "rms_norm_quantize_activations" : "quantize_activations";
  if (options.gate_up_input) name += "_" + to_string(*options.gate_up_input) + "_gate_up";
  if (options.write_normalized) name += "_normalized";
  KernelBuilder k(name + "_" + std::to_string(dim), {w, 1, 1});
  std::vector<Buffer<f32>> inputs;  // x, or gate and up
  for (const char* input : options.gate_up_input ? std::vector{"gate", "up"} : std::vector{"x"})
    inputs.push_back(k.buffer<f32>(input, Access::Read));
  std::optional<Buffer<f32>> norm_weight;
  if (options.rms_norm) norm_weight = k.buffer<f32>("norm_weight", Access::Read);
  auto q = k.buffer<u32>("q", Access::Write);
  auto act = k.buffer<u32>("act", Access::Write);
  std::optional<Buffer<f32>> normalized;
  if (options.write_normalized) normalized = k.buffer<f32>("normalized", Access::Write);
  std::optional<Expr<f32>> eps;
  if (options.rms_norm) eps = k.push<f32>("eps");

  auto token = k.workgroup_id().x();
  auto x_base = let("x_base", token * dim);
  QuantizeBody body;
  body.dim = dim;
  body.workgroup = w;
  if (options.gate_up_input) {
    body.load_x = [&](Expr<u32> i) {
      return gate_product(*options.gate_up_input, Expr<f32>(inputs[0][x_base + i]), Expr<f32>(inputs[1][x_base + i]));
    };
  } else {
    body.load_x = [&](Expr<u32> i) { return Expr<f32>(inputs[0][x_base + i]); };
  }
  if (norm_weight) body.load_norm_weight = [&](Expr<u32> i) { return Expr<f32>((*norm_weight)[i]); };
  body.eps = eps;
  body.norm_scale = norm_scale_mode(target, body.workgroup);
  if (normalized) body.store_normalized = [&](Expr<u32> i, Expr<f32> v) { (*normalized)[x_base + i] = v; };
  emit_token_quantize(k, body, q, act, token);
  return k.build();
}

Plan plan_quantize_activations(const OpTarget& target, uint32_t dim, const QuantizeOptions& options) {
  return {quantize_activations(target, dim, options), [](uint32_t tokens) { return rt::Grid{tokens}; }};
}

}  // namespace bdsl::ops
