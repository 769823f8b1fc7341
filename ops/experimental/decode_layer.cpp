#include "ops/experimental/decode_layer.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "dsl/dsl.h"
#include "ops/experimental/phase_sync.h"
#include "ops/ternary/ternary_projection.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

namespace {

struct Phase {
  std::string what;
  std::vector<detail::ProjectionTensor> tensors;
  uint32_t cols;
  detail::ProjectionCombine combine;
  MatvecOptions options;
  bool rope;
  uint32_t workgroups;
};

std::vector<Phase> phases(const OpTarget& t, const DecodeLayerShape& s, const DecodeLayerOptions& o) {
  const auto& d = s.dims;
  std::vector<Phase> p = {
      {"attn_output", {{"w", s.dim}}, d.q_width(), detail::kSeparate, o.residual, false,
       ternary_matvec_workgroups(t, s.dim, o.residual)},
      {"gate_up", {{"gate", s.ffn}, {"up", s.ffn}}, s.dim, GateActivation::Relu2, o.gate_up, false,
       ternary_matvec_workgroups(t, s.ffn, o.gate_up)},
      {"ffn_down", {{"w", s.dim}}, s.ffn, detail::kSeparate, o.residual, false, ternary_matvec_workgroups(t, s.dim, o.residual)},
  };
  if (s.from_ffn_down) p.erase(p.begin(), p.begin() + 2);  // without next_qkv: ffn_down alone
  if (s.next_qkv) {
    MatvecOptions q = o.qkv;
    q.rows_per_subgroup = 4;
    p.push_back({"qkv", {{"q", d.q_width()}, {"k", d.kv_width()}, {"v", d.kv_width()}}, s.dim, detail::kSeparate, q, true,
                 ternary_matvec_qkv_rope_workgroups(t, d, q)});
  }
  const uint32_t wg = ternary_matvec_workgroup(t, p[0].options);
  for (const Phase& ph : p) {
    if (ph.options.input != MatvecInput::NormalizeInWorkgroup)
      throw std::invalid_argument("decode_layer: every phase normalizes its input in the workgroup");
    if (ternary_matvec_workgroup(t, ph.options) != wg)
      throw std::invalid_argument("decode_layer: the phases' workgroup sizes differ");
  }
  return p;
}

}  // namespace

uint32_t decode_layer_workgroups(const OpTarget& target, const DecodeLayerShape& shape, const DecodeLayerOptions& options) {
  uint32_t n = 0;
  for (const Phase& p : phases(target, shape, options)) n += p.workgroups;
  return n;
}

uint32_t decode_layer_counter_words() { return 4 * kPhaseCounterStride; }

bool decode_layer_fits(const OpTarget& target, const DecodeLayerShape& shape, const DecodeLayerOptions& options) {
  uint64_t bytes = 0;
  for (const Phase& p : phases(target, shape, options))
    bytes += p.cols + 3ull * 4 * ternary_matvec_workgroup(target, p.options);  // q words + reduction scratch
  return bytes <= target.max_shared_bytes;
}

Kernel decode_layer(const OpTarget& target, const DecodeLayerShape& shape, const DecodeLayerOptions& options,
                    uint32_t spin_limit) {
  shape.dims.check("decode_layer");
  const auto ph = phases(target, shape, options);
  if (!decode_layer_fits(target, shape, options))
    throw std::invalid_argument("decode_layer: the phases' shared memory does not fit in " +
                                std::to_string(target.max_shared_bytes) + " bytes");
  const uint32_t wg = ternary_matvec_workgroup(target, ph[0].options);
  const auto& d = shape.dims;
  KernelBuilder k("decode_layer" + std::string(shape.from_ffn_down ? "_down" : "") + std::string(shape.next_qkv ? "_qkv" : "") + "_" + std::to_string(shape.dim) + "_" +
                      std::to_string(shape.ffn) + "_" + std::to_string(d.n_heads) + "x" + std::to_string(d.n_kv_heads) +
                      "x" + std::to_string(d.head_dim) + (options.memory_model ? "_mm" : ""),
                  {wg, 1, 1});
  auto step = k.buffer<u32>("step", Access::Read);
  auto counters = k.volatile_buffer<u32>("counters", Access::ReadWrite);
  auto eps = k.push<f32>("eps");
  auto base = k.push<u32>("phase_base");
  const PhaseSync sync(k, step, counters, spin_limit ? spin_limit : kPhaseSpinLimit, options.memory_model);
  const detail::RopeKvEpilogue rope{d, shape.context};

  auto id = k.workgroup_id().x();
  std::function<void(size_t, uint32_t)> phase = [&](size_t p, uint32_t first) {
    auto body = [&] {
      detail::ProjectionSite site{&k, p == 0 ? id : let("phase_workgroup", id - first)};
      site.eps = eps;
      site.step = step;
      site.sharing = options.memory_model ? detail::Sharing::Handoff : detail::Sharing::Coherent;
      if (p > 0) site.before_activations = [&] { sync.wait(base + kPhaseCounterStride * uint32_t(p - 1), ph[p - 1].workgroups); };
      detail::emit_ternary_projection(site, target, ph[p].what, ph[p].tensors, ph[p].cols, ph[p].combine, ph[p].options,
                                      ph[p].rope ? &rope : nullptr);
      if (p + 1 < ph.size()) sync.signal(base + kPhaseCounterStride * uint32_t(p));
    };
    if (p + 1 == ph.size())
      body();
    else
      if_(id < first + ph[p].workgroups, body).else_([&] { phase(p + 1, first + ph[p].workgroups); });
  };
  phase(0, 0);
  return k.build();
}

Plan plan_decode_layer(const OpTarget& target, const DecodeLayerShape& shape, const DecodeLayerOptions& options,
                       uint32_t spin_limit) {
  return {decode_layer(target, shape, options, spin_limit), fixed_grid({decode_layer_workgroups(target, shape, options)})};
}

}  // namespace bdsl::ops
