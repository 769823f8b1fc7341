// Every ternary matrix-vector variant the device can run, alone, at the 2B-4T shapes: GPU time per
// dispatch (each behind a barrier, weights streamed from memory), GB/s, fraction of peak, TOPS.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/bench_registry.h"
#include "ops/ternary.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
namespace {

void matvec(benchmark::State& st, BenchSession& s, uint32_t rows, uint32_t cols, ops::DotProduct dot) {
  auto& ctx = *s.ctx;
  ops::MatvecOptions o;
  o.dot = dot;
  rt::Pipeline p = rt::make_pipeline(ctx, ops::ternary_matvec(s.target, rows, cols, o));
  // Several weight copies in turn, so each dispatch streams its weights from memory, not cache.
  constexpr int kCopies = 8, kDispatches = 16;
  const uint64_t weight_bytes = uint64_t{rows} * cols / 4 + 32;
  std::vector<rt::Buffer> weights;
  for (int i = 0; i < kCopies; ++i) {
    weights.emplace_back(ctx, weight_bytes, rt::BufferOptions{false, "weights"});
    weights.back().fill(0x55555555);  // code 1 (zero) everywhere: the values do not change the time
  }
  rt::Buffer q(ctx, cols, {false, "q"}), act(ctx, 8, {false, "act"}), y(ctx, rows * 4ull, {false, "y"});
  q.fill(0x01010101);
  act.fill(0x3f800000);
  rt::Graph g(ctx, {true, "matvec"});
  for (int i = 0; i < kDispatches; ++i)  // each writes y: a barrier between them, as in a real token
    g.dispatch(p, {weights[i % kCopies], q, act, y}, rt::Grid{ops::ternary_matvec_workgroups(s.target, rows)});
  const double per = time_median_dispatch(st, g);
  st.counters["GB_per_s"] = double(weight_bytes) / per;
  st.counters["frac_of_peak"] = double(weight_bytes) / per / s.peak_read_gbps;
  st.counters["TOPS"] = 2.0 * rows * cols / per / 1e3;
}

}  // namespace

void register_matvec_benchmarks(BenchSession& s) {
  struct Shape {
    uint32_t rows, cols;
  };
  const std::vector<Shape> shapes = s.options.quick ? std::vector<Shape>{{512, 512}, {1536, 512}}
                                                     : std::vector<Shape>{{2560, 2560}, {6912, 2560}, {2560, 6912}};
  std::vector<std::pair<const char*, ops::DotProduct>> variants = {{"plain", ops::DotProduct::PlainInteger}};
  if (s.target.int_dot_product) variants.insert(variants.begin(), {"packed_sdot", ops::DotProduct::Packed});
  for (const auto& [variant, dot] : variants)
    for (const auto& sh : shapes)
      benchmark::RegisterBenchmark(fmt::format("matvec/{}/{}x{}", variant, sh.rows, sh.cols).c_str(),
                                   [&s, sh, d = dot](benchmark::State& st) { matvec(st, s, sh.rows, sh.cols, d); })
          ->UseManualTime()->Iterations(s.options.quick ? 2 : 20)->Unit(benchmark::kMicrosecond);
}

}  // namespace bdsl::bench
