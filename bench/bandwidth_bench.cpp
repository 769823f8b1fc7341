// The device's peak read bandwidth, measured with ops::stream_read: the yardstick every other
// figure is compared with (fraction of peak, roofline).
#include <benchmark/benchmark.h>

#include "bench/bench_registry.h"

namespace bdsl::bench {

void register_bandwidth_benchmarks(BenchSession& s) {
  benchmark::RegisterBenchmark("peak_read_bandwidth", [&s](benchmark::State& st) {
    const uint64_t bytes = s.options.quick ? (64ull << 20) : (1ull << 30);
    double gbps = 0;
    for (auto _ : st) {
      double ns = 0;
      gbps = measure_peak_read(*s.ctx, bytes, 1, &ns);
      st.SetIterationTime(ns * 1e-9);
    }
    st.counters["GB_per_s"] = gbps;
    st.counters["session_peak_GB_per_s"] = s.peak_read_gbps;
  })->UseManualTime()->Iterations(s.options.quick ? 2 : 10)->Unit(benchmark::kMicrosecond);
}

}  // namespace bdsl::bench
