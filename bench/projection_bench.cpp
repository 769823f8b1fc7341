// The decode projections exactly as the model records them (norm fused in front, residual or
// relu² or RoPE after), each in a chain of dispatches behind barriers with weights streamed from
// memory, over the workgroup sizes and rows per subgroup the kernels take: which shape of
// kernel the device likes. `projection/<op>/<input>/wg:W/rs:R`, GPU time per dispatch.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <functional>

#include "bench/bench_registry.h"
#include "ops/common.h"
#include "ops/examples.h"
#include "ops/ternary.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
namespace {

enum class Op { Qkv, AttnOutput, GateUp, FfnDown };

struct Shape {
  uint32_t dim, ffn;
  ops::AttentionDims heads;
};

void projection(benchmark::State& st, BenchSession& s, Op op, const Shape& sh, bool normed, uint32_t wg, uint32_t rs) {
  auto& ctx = *s.ctx;
  ops::MatvecOptions o;
  o.input = normed ? ops::MatvecInput::NormalizeInWorkgroup : ops::MatvecInput::Quantized;
  o.workgroup = wg;
  o.rows_per_subgroup = rs;
  o.add_residual = op == Op::AttnOutput || op == Op::FfnDown;
  const auto& d = sh.heads;
  dsl::Kernel kernel = [&] {
    switch (op) {
      case Op::Qkv: return ops::ternary_matvec_qkv_rope(s.target, d, sh.dim, 4096, o);
      case Op::AttnOutput: return ops::ternary_matvec(s.target, sh.dim, d.q_width(), o);
      case Op::GateUp: return ops::ternary_matvec_gate_up(s.target, sh.ffn, sh.dim, ops::GateActivation::Relu2, o);
      case Op::FfnDown: return ops::ternary_matvec(s.target, sh.dim, sh.ffn, o);
    }
    throw std::logic_error("op");
  }();
  rt::Pipeline p = rt::make_pipeline(ctx, kernel);
  const uint32_t cols = op == Op::FfnDown ? sh.ffn : sh.dim;
  std::vector<uint32_t> tensor_rows;
  switch (op) {
    case Op::Qkv: tensor_rows = {d.q_width(), d.kv_width(), d.kv_width()}; break;
    case Op::AttnOutput: tensor_rows = {sh.dim}; break;
    case Op::GateUp: tensor_rows = {sh.ffn, sh.ffn}; break;
    case Op::FfnDown: tensor_rows = {sh.dim}; break;
  }
  uint32_t out_rows = 0;
  for (uint32_t r : tensor_rows) out_rows += r;
  // Several weight copies in turn, so each dispatch streams its weights from memory, not cache.
  constexpr int kCopies = 16, kDispatches = 32;  // 16 copies: more than the L2 holds
  uint64_t weight_bytes = 0;
  std::vector<std::vector<rt::Buffer>> weights(kCopies);
  for (auto& copy : weights)
    for (uint32_t r : tensor_rows) {
      const uint64_t bytes = uint64_t{r} * cols / 4 + 32;
      copy.emplace_back(ctx, bytes, rt::BufferOptions{false, "weights"});
      copy.back().fill(0x55555555);  // code 1 (zero) everywhere: the values do not change the time
    }
  for (uint32_t r : tensor_rows) weight_bytes += uint64_t{r} * cols / 4;
  rt::Buffer x(ctx, cols * 4ull, {false, "x"}), nw(ctx, cols * 4ull, {false, "norm weight"});
  x.fill(0x3f800000);
  nw.fill(0x3f800000);
  rt::Buffer q(ctx, cols, {false, "q"}), act(ctx, 8, {false, "act"});
  q.fill(0x01010101);
  act.fill(0x3f800000);
  rt::Buffer step(ctx, sizeof(ops::StepState), {false, "step"});
  step.fill(0);
  rt::Buffer y(ctx, out_rows * 4ull, {false, "y"});
  rt::Buffer cache(ctx, 4096ull * d.kv_words() * 4, {false, "kv cache"});
  rt::Buffer rope_table(ctx, 4096ull * d.head_dim * 4, {false, "rope table"});  // (cos, sin) pairs
  rope_table.fill(0x3f800000);
  rt::Graph g(ctx, {true, "projection"});
  const uint32_t groups = op == Op::Qkv ? ops::ternary_matvec_qkv_rope_workgroups(s.target, d, o)
                                        : ops::ternary_matvec_workgroups(s.target, op == Op::GateUp ? sh.ffn : sh.dim, o);
  for (int i = 0; i < kDispatches; ++i) {
    std::vector<rt::BufferSlice> b;
    for (auto& w : weights[i % kCopies]) b.push_back(w);
    if (normed) {
      b.push_back(x);
      b.push_back(nw);
    } else {
      b.push_back(q);
      b.push_back(act);
    }
    if (op == Op::Qkv) {
      const uint64_t half = cache.size() / 2;  // K and V apart, as the model's caches are
      b.insert(b.end(), {step, rope_table, y, cache.slice(0, half), cache.slice(half, half)});
    } else {
      b.push_back(y);
    }
    // Every dispatch writes y (or the cache): a barrier between them, as in a real token.
    const rt::PushConstants push = normed ? rt::push(1e-5f) : rt::push();
    g.dispatch(p, b, push, rt::Grid{groups});
  }
  // The GPU clocks down between benchmarks: a short chain alone measured 3-4x the same kernel's
  // time inside a token. Keep it busy for a while first.
  for (const auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300);)
    g.submit_and_wait();
  const double per = time_median_dispatch(st, g);
  st.counters["GB_per_s"] = double(weight_bytes) / per;
  st.counters["workgroups"] = groups;
}

// The yardstick for the above: a plain streaming read of the same size in the same kind of
// chain (what any kernel reading that many bytes once costs on this device).
// `independent`: every dispatch writes its own output, so the graph puts no barrier between them
// (what overlapping independent work can gain on this device).
void stream_chain(benchmark::State& st, BenchSession& s, uint64_t bytes, uint32_t groups, bool independent) {
  auto& ctx = *s.ctx;
  bytes &= ~uint64_t{15};
  constexpr int kCopies = 16, kDispatches = 32;
  std::vector<rt::Buffer> data;
  for (int i = 0; i < kCopies; ++i) {
    data.emplace_back(ctx, bytes, rt::BufferOptions{false, "stream data"});
    data.back().fill(0x01020304);
  }
  std::vector<rt::Buffer> outs;
  for (int i = 0; i < (independent ? kDispatches : 1); ++i) outs.emplace_back(ctx, groups * 4ull, rt::BufferOptions{false, "stream out"});
  rt::Pipeline p = rt::make_pipeline(ctx, ops::stream_read(s.target));
  rt::Graph g(ctx, {false, "stream chain"});  // no timestamps: they would serialize the dispatches
  for (int i = 0; i < kDispatches; ++i)
    g.dispatch(p, {data[i % kCopies], outs[independent ? i : 0]}, rt::push(uint32_t(bytes / 16)), rt::Grid{groups});
  for (const auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300);)
    g.submit_and_wait();
  // Wall time per dispatch of the whole chain (submit and wait included, over 32 dispatches).
  double per = 0;
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    g.submit_and_wait();
    per = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kDispatches;
    st.SetIterationTime(per * 1e-9);
  }
  st.counters["GB_per_s"] = double(bytes) / per;
  st.counters["steps"] = g.stats().steps;
}

}  // namespace

void register_projection_benchmarks(BenchSession& s) {
  for (uint64_t kb : s.options.quick ? std::vector<uint64_t>{256} : std::vector<uint64_t>{0, 1600, 4400, 8800, 17600})
    for (uint32_t groups : s.options.quick ? std::vector<uint32_t>{64}
                           : kb == 0       ? std::vector<uint32_t>{1, 132, 264, 1056}
                                           : std::vector<uint32_t>{264, 1056})
      for (bool independent : {false, true})
        benchmark::RegisterBenchmark(
            fmt::format("stream_chain/KB:{}/groups:{}/{}", kb, groups, independent ? "no_barriers" : "barriers").c_str(),
            [&s, kb, groups, independent](benchmark::State& st) {
              stream_chain(st, s, std::max<uint64_t>(kb, 1) * 1000, groups, independent);
            })
            ->UseManualTime()->Iterations(s.options.quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
  const Shape sh = s.options.quick ? Shape{512, 1536, {8, 2, 64}} : Shape{2560, 6912, {20, 5, 128}};
  const std::vector<std::pair<const char*, Op>> ops = {
      {"qkv_rope", Op::Qkv}, {"attn_output", Op::AttnOutput}, {"gate_up", Op::GateUp}, {"ffn_down", Op::FfnDown}};
  const uint32_t sg = std::max(1u, s.target.subgroup_size);
  std::vector<uint32_t> wgs = s.options.quick ? std::vector<uint32_t>{0} : std::vector<uint32_t>{128, 256};
  for (const auto& [name, op] : ops)
    for (bool normed : {true, false})
      for (uint32_t wg : wgs) {
        if (wg % sg || wg > s.target.max_workgroup_invocations) continue;
        for (uint32_t rs : op == Op::Qkv ? std::vector<uint32_t>{4} : std::vector<uint32_t>{1, 2, 4}) {
          if (s.options.quick && rs != 2 && op != Op::Qkv) continue;
          benchmark::RegisterBenchmark(
              fmt::format("projection/{}/{}/wg:{}/rs:{}", name, normed ? "normed" : "quantized", wg, rs).c_str(),
              [&s, sh, op = op, normed, wg, rs](benchmark::State& st) { projection(st, s, op, sh, normed, wg, rs); })
              ->UseManualTime()->Iterations(s.options.quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
        }
      }
}

}  // namespace bdsl::bench
