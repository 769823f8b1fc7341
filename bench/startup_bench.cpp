// Start-up: building every pipeline of the model from an empty cache (print, glslang, spirv-opt,
// driver compile) against a warm one (SPIR-V from disk, VkPipelineCache reloaded).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>

#include "bench/bench_registry.h"
#include "models/bitnet/bitnet_pipelines.h"

namespace bdsl::bench {
namespace {

void pipelines(benchmark::State& st, BenchSession& s, bool warm) {
  namespace fs = std::filesystem;
  const auto file = models::GgufFile::open(s.model_path);
  const auto config = models::BitNetConfig::from_gguf(file);
  const fs::path dir = fs::temp_directory_path() / ("bdsl-bench-startup-" + std::to_string(::getpid()));
  for (auto _ : st) {
    st.PauseTiming();
    fs::remove_all(dir);
    if (warm) {  // one build to fill both caches, outside the timing
      rt::ContextOptions o{s.options.device, false, dir, true};
      rt::Context ctx(o);
      codegen::ShaderCache cache(dir);
      bitnet::BitNetPipelines p(ctx, config, 40, cache);
    }
    st.ResumeTiming();
    const auto t0 = std::chrono::steady_clock::now();
    rt::ContextOptions o{s.options.device, false, dir, true};
    rt::Context ctx(o);
    codegen::ShaderCache cache(dir);
    bitnet::BitNetPipelines p(ctx, config, 40, cache);
    st.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    const auto stats = cache.stats();
    st.counters["compiled"] = double(stats.misses);
    st.counters["disk_hits"] = double(stats.disk_hits);
    st.counters["compile_ms"] = stats.compile_ms;
  }
  fs::remove_all(dir);
}

}  // namespace

void register_startup_benchmarks(BenchSession& s) {
  benchmark::RegisterBenchmark("startup/pipelines_cold", [&s](benchmark::State& st) { pipelines(st, s, false); })
      ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("startup/pipelines_warm", [&s](benchmark::State& st) { pipelines(st, s, true); })
      ->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

}  // namespace bdsl::bench
