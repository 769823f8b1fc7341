#include "ops/ternary_matvec.h"

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/matrix_support.h"
#include "ops/quantize_activations.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

enum class Combine { Separate, Relu2Product };

struct Tensor {
  std::string name;
  uint32_t rows;
};

using QuadLoader = std::function<Expr<uvec4>(Expr<u32>)>;

Expr<i32> tree_sum(std::vector<Expr<i32>> v) {
  while (v.size() > 1) {
    std::vector<Expr<i32>> next;
    for (size_t i = 0; i + 1 < v.size(); i += 2) next.push_back(v[i] + v[i + 1]);
    if (v.size() % 2) next.push_back(v.back());
    v = std::move(next);
  }
  return v.front();
}

// sum over the four bytes of code * q, codes at bit `shift` of each byte of `w`.
Expr<i32> code_dot(const Expr<u32>& w, uint32_t shift, const Expr<u32>& q_word, bool packed) {
  if (packed) return sdot4x8(shift ? (w >> shift) & 0x03030303u : w & 0x03030303u, q_word);
  auto q = bitcast<i32>(q_word);
  std::vector<Expr<i32>> terms;
  for (int b = 0; b < 4; ++b)
    terms.push_back(cast<i32>(bitfield_extract(w, 8 * b + static_cast<int>(shift), 2)) * bitfield_extract(q, 8 * b, 8));
  return tree_sum(terms);
}

// The subgroup's sum(code * q) over one row of each tensor (all with `chunks` uvec4 per row);
// row_base[t] is the uvec4 index where tensor t's row starts. Every lane gets the sums.
std::vector<Expr<i32>> emit_row_dots(KernelBuilder& k, const std::vector<Buffer<uvec4>>& w,
                                     const std::vector<Expr<u32>>& row_base, uint32_t chunks,
                                     const QuadLoader& q, bool packed) {
  std::vector<Var<i32>> acc;
  for (size_t t = 0; t < w.size(); ++t) acc.push_back(k.var<i32>("dot" + std::to_string(t), 0));
  for_range(k.subgroup_invocation(), chunks, k.subgroup_size(), [&](Expr<u32> c) {
    // uvec4 c is words 4h..4h+3 of block c/2 (h = c % 2); its shift-j codes pair with the q
    // words 32 * block + 8j + 4h .., the uvec4 8 * block + 2j + h of q.
    auto q_at = let("q_at", ((c >> 1u) << 3u) + (c & 1u));
    std::vector<Expr<uvec4>> qv;
    for (uint32_t j = 0; j < 4; ++j) qv.push_back(let("qv" + std::to_string(j), q(q_at + 2u * j)));
    for (size_t t = 0; t < w.size(); ++t) {
      auto wv = let("wv" + std::to_string(t), Expr<uvec4>(w[t][row_base[t] + c]));
      std::vector<Expr<i32>> terms;
      for (uint32_t j = 0; j < 4; ++j)
        for (uint32_t m = 0; m < 4; ++m) terms.push_back(code_dot(wv.lane(m), 6 - 2 * j, qv[j].lane(m), packed));
      acc[t] += tree_sum(terms);
    }
  }, "chunk");
  std::vector<Expr<i32>> sums;
  for (auto& a : acc) sums.push_back(subgroup_add(Expr<i32>(a)));
  return sums;
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

Kernel build_matvec(const OpTarget& target, const std::string& what, const std::vector<Tensor>& tensors,
                    uint32_t cols, Combine combine, const MatvecOptions& o) {
  check_shapes(what, tensors, cols);
  const bool packed = o.dot == DotProduct::Auto ? target.int_dot_product : o.dot == DotProduct::Packed;
  const bool norm = o.input == MatvecInput::NormalizeInWorkgroup;
  const uint32_t wg = ternary_matvec_workgroup(target);
  const uint32_t rows_per_wg = rows_per_workgroup(target, wg);
  const uint32_t chunks = cols / 64;
  if (norm && cols + 3 * wg * 4 > target.max_shared_bytes)
    throw std::invalid_argument(what + ": " + std::to_string(cols) + " int8 activations and the reduction scratch do not fit in " +
                                std::to_string(target.max_shared_bytes) + " bytes of shared memory");

  std::string name = what + (packed ? "_sdot" : "_int") + (norm ? "_normed" : "") +
                     (o.add_residual ? "_residual" : "") + (o.write_accumulators ? "_acc" : "") +
                     shape_suffix(tensors, cols);
  KernelBuilder k(name, {wg, 1, 1});
  std::vector<Buffer<uvec4>> w;
  for (const Tensor& t : tensors)
    w.push_back(k.buffer<uvec4>(tensors.size() == 1 ? "w" : "w_" + t.name, Access::Read));
  std::optional<Buffer<uvec4>> x_q;
  std::optional<Buffer<u32>> x_act;
  std::optional<Buffer<f32>> x, norm_weight;
  if (norm) {
    x = k.buffer<f32>("x", Access::Read);
    norm_weight = k.buffer<f32>("norm_weight", Access::Read);
  } else {
    x_q = k.buffer<uvec4>("x_q", Access::Read);
    x_act = k.buffer<u32>("x_act", Access::Read);
  }
  const Access out_access = o.add_residual ? Access::ReadWrite : Access::Write;
  std::vector<Buffer<f32>> y;
  if (combine == Combine::Relu2Product || tensors.size() == 1)
    y.push_back(k.buffer<f32>("y", out_access));
  else
    for (const Tensor& t : tensors) y.push_back(k.buffer<f32>("y_" + t.name, out_access));
  std::vector<Buffer<i32>> accs;
  if (o.write_accumulators)
    for (const Tensor& t : tensors) accs.push_back(k.buffer<i32>("acc_" + t.name, Access::Write));
  std::optional<Expr<f32>> eps;
  if (norm) eps = k.push<f32>("eps");

  // The activations: scale s, sum(q) and a loader of q's uvec4.
  std::optional<Expr<f32>> s;
  std::optional<Expr<i32>> q_sum;
  QuadLoader q;
  if (norm) {
    auto words = k.shared<u32>("q_words", cols / 4);
    QuantizeBody body;
    body.dim = cols;
    body.workgroup = wg;
    body.load_x = [&](Expr<u32> i) { return Expr<f32>((*x)[i]); };
    body.load_norm_weight = [&](Expr<u32> i) { return Expr<f32>((*norm_weight)[i]); };
    body.eps = eps;
    body.store_q = [&](Expr<u32> word, Expr<u32> v) { words[word] = v; };
    const QuantizedTotals totals = emit_quantize_activations(k, body);  // ends with a barrier
    s = totals.scale;
    q_sum = totals.sum;
    q = [words](Expr<u32> i) {
      auto b = i * 4u;
      return make_vec<u32>(words[b], words[b + 1u], words[b + 2u], words[b + 3u]);
    };
  } else {
    s = let("act_scale", bitcast<f32>(Expr<u32>((*x_act)[0u])));
    q_sum = let("q_sum", bitcast<i32>(Expr<u32>((*x_act)[1u])));
    q = [&](Expr<u32> i) { return Expr<uvec4>((*x_q)[i]); };
  }
  std::vector<Expr<f32>> scales;
  for (size_t t = 0; t < tensors.size(); ++t)
    scales.push_back(let("scale_" + tensors[t].name,
                         bitcast<f32>(Expr<uvec4>(w[t][uint32_t(uint64_t(tensors[t].rows) * cols / 64)]).x())));

  std::vector<uint32_t> offsets{0};
  for (const Tensor& t : tensors) offsets.push_back(offsets.back() + t.rows);
  const uint32_t total = offsets.back();
  auto first = let("first_row", k.workgroup_id().x() * rows_per_wg);
  auto end = let("end_row", min(first + rows_per_wg, total));
  auto lane0 = k.subgroup_invocation() == 0u;
  auto project = [&](Expr<i32> dot, size_t t) { return cast<f32>(dot - *q_sum) / *s * scales[t]; };
  auto store = [&](const Buffer<f32>& out, Expr<u32> r, Expr<f32> v) {
    if (o.add_residual)
      out[r] = out[r] + v;
    else
      out[r] = v;
  };

  for_range(first + k.subgroup_id(), end, k.num_subgroups(), [&](Expr<u32> row) {
    if (combine == Combine::Relu2Product) {
      auto base = let("row_base", row * chunks);
      auto dots = emit_row_dots(k, w, {base, base}, chunks, q, packed);
      auto gate = let("gate", project(dots[0], 0));
      auto up = let("up", project(dots[1], 1));
      auto g = let("gate_relu", max(gate, 0.0f));
      if_(lane0, [&] {
        store(y[0], row, g * g * up);  // as golden::relu2_gate: (g * g) * up
        if (o.write_accumulators) {
          accs[0][row] = dots[0] - *q_sum;
          accs[1][row] = dots[1] - *q_sum;
        }
      });
      return;
    }
    std::function<void(size_t)> segment = [&](size_t t) {
      auto body = [&] {
        auto local = t == 0 ? row : let("local_row", row - offsets[t]);
        auto dots = emit_row_dots(k, {w[t]}, {let("row_base", local * chunks)}, chunks, q, packed);
        auto v = let("proj", project(dots[0], t));
        if_(lane0, [&] {
          store(y[y.size() == 1 ? 0 : t], local, v);
          if (o.write_accumulators) accs[t][local] = dots[0] - *q_sum;
        });
      };
      if (t + 1 == tensors.size())
        body();
      else
        if_(row < offsets[t + 1], body).else_([&] { segment(t + 1); });
    };
    segment(0);
  }, "row");
  return k.build();
}

}  // namespace

uint32_t ternary_matvec_workgroup(const OpTarget& target) { return subgroup_multiple_workgroup(target, 256); }

uint32_t ternary_matvec_workgroups(const OpTarget& target, uint32_t total_rows) {
  return ceil_div(total_rows, rows_per_workgroup(target, ternary_matvec_workgroup(target)));
}

Kernel ternary_matvec(const OpTarget& target, uint32_t rows, uint32_t cols, MatvecOptions options) {
  return build_matvec(target, "ternary_matvec", {{"w", rows}}, cols, Combine::Separate, options);
}

Kernel ternary_matvec_qkv(const OpTarget& target, uint32_t q_rows, uint32_t k_rows, uint32_t v_rows, uint32_t cols,
                          MatvecOptions options) {
  if (options.add_residual) throw std::invalid_argument("ternary_matvec_qkv: no residual for Q, K and V");
  return build_matvec(target, "ternary_matvec_qkv", {{"q", q_rows}, {"k", k_rows}, {"v", v_rows}}, cols,
                      Combine::Separate, options);
}

Kernel ternary_matvec_relu2_gate_up(const OpTarget& target, uint32_t rows, uint32_t cols, MatvecOptions options) {
  return build_matvec(target, "ternary_matvec_relu2_gate_up", {{"gate", rows}, {"up", rows}}, cols,
                      Combine::Relu2Product, options);
}

}  // namespace bdsl::ops
