// What the tensor cores give a subgroup under Vulkan, and what each part of a tensor-core matmul's
// block loop costs around them: `coop_probe/<M>x<N>x<K>/<mode>/groups:G/steps:S`, int8 TOPS of G
// workgroups of 8 subgroups, each multiplying a 128-row x 64-token tile (32 x 32 a subgroup) by
// S 128-column steps with ternary_matmul_coopmat's shared layout. Modes, each adding to the one
// before: mma (operands loaded once), load_mma (each step's operands from shared memory),
// barriers (two workgroup barriers a step), stash (each step's tile written to shared memory from
// registers, weights unpacked as the matmul does), fetch (and read from device memory first, one
// step ahead: the matmul's whole loop, without its epilogue).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <vector>

#include "bench/bench_registry.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
namespace {
using namespace bdsl::dsl;

constexpr uint32_t kRowWords = 9;  // uvec4 per staged 128-column row, as the matmul pads it
constexpr uint32_t kRows = 128, kTokens = 64, kInvocations = 256;
enum class Mode { Mma, LoadMma, Barriers, Stash, Fetch };
constexpr const char* kModeNames[] = {"mma", "load_mma", "barriers", "stash", "fetch"};

Expr<u32> ternary_bytes(const Expr<u32>& word, uint32_t shift) {
  return (((word >> shift) & 0x03030303u) + 0x7f7f7f7fu) ^ 0x80808080u;
}

template <uint32_t M, uint32_t N, uint32_t K>
Kernel probe(Mode mode, uint32_t steps) {  // for subgroups of 32 (NVIDIA)
  const uint32_t row_tiles = 32 / M, token_tiles = 32 / N;
  KernelBuilder k(fmt::format("coop_probe_{}x{}x{}_{}_{}", M, N, K, kModeNames[int(mode)], steps), {kInvocations, 1, 1});
  auto w = k.buffer<uvec4>("w", Access::Read);
  auto x = k.buffer<uvec4>("x", Access::Read);
  auto out = k.buffer<i32>("out", Access::Write);
  const uint32_t a_words = kRows * kRowWords;
  auto tile = k.shared<uvec4>("tile", (kRows + kTokens) * kRowWords);
  for_range(k.local_index(), (kRows + kTokens) * kRowWords, kInvocations, [&](Expr<u32> i) {
    tile[i] = make_vec<u32>(i, i * 3u, i * 5u, i * 7u);
  });
  barrier();
  auto a_at = let("a_at", (k.subgroup_id() % 4u) * (32 * kRowWords));
  auto b_at = let("b_at", (k.subgroup_id() / 4u) * (32 * kRowWords) + a_words);
  std::vector<MatrixAcc<i32, M, N>> acc;
  for (uint32_t i = 0; i < row_tiles * token_tiles; ++i) acc.push_back(k.matrix<MatrixAcc<i32, M, N>>("acc" + std::to_string(i), 0));
  std::vector<MatrixA<i8, M, K>> a;
  std::vector<MatrixB<i8, K, N>> b;
  for (uint32_t i = 0; i < row_tiles; ++i) a.push_back(k.matrix<MatrixA<i8, M, K>>("a" + std::to_string(i)));
  for (uint32_t j = 0; j < token_tiles; ++j) b.push_back(k.matrix<MatrixB<i8, K, N>>("b" + std::to_string(j)));
  auto load = [&](Expr<u32> kk) {
    for (uint32_t i = 0; i < row_tiles; ++i) a[i].load(tile, a_at + i * M * kRowWords + kk, kRowWords, MatrixLayout::RowMajor);
    for (uint32_t j = 0; j < token_tiles; ++j) b[j].load(tile, b_at + j * N * kRowWords + kk, kRowWords, MatrixLayout::ColumnMajor);
  };
  // The matmul's staging registers: one weight uvec4 and two activation uvec4 per invocation.
  auto li = k.local_index();
  auto ws = k.var<uvec4>("w_stage", make_vec<u32>(li, li, li, li));
  auto xs0 = k.var<uvec4>("x_stage0", make_vec<u32>(li, 1u, 2u, 3u));
  auto xs1 = k.var<uvec4>("x_stage1", make_vec<u32>(li, 4u, 5u, 6u));
  auto row = let("row", k.workgroup_id().x() * kRows + (li >> 1u));
  auto fetch = [&](Expr<u32> step) {  // 2560-column weight rows and token rows, as the matmul reads them
    ws = w[(row % 2560u) * 40u + (step % 20u) * 2u + (li & 1u)];
    xs0 = x[((li >> 3u) + (k.workgroup_id().x() % 8u) * 64u) * 160u + (step % 20u) * 8u + (li & 7u)];
    xs1 = x[(((li + 256u) >> 3u) + (k.workgroup_id().x() % 8u) * 64u) * 160u + (step % 20u) * 8u + (li & 7u)];
  };
  if (mode == Mode::Mma) load(constant<u32>(0u));
  if (mode >= Mode::Fetch) fetch(constant<u32>(0u));
  for_range(0u, steps, [&](Expr<u32> step) {
    if (mode >= Mode::Barriers) barrier();
    if (mode >= Mode::Stash) {
      auto at = let("a_stash", (li >> 1u) * kRowWords + (li & 1u));
      Expr<uvec4> v = ws;
      for (uint32_t j = 0; j < 4; ++j) {
        const uint32_t shift = 6 - 2 * j;
        tile[at + 2 * j] = make_vec<u32>(ternary_bytes(v.x(), shift), ternary_bytes(v.y(), shift), ternary_bytes(v.z(), shift),
                                         ternary_bytes(v.w(), shift));
      }
      tile[a_words + (li >> 3u) * kRowWords + (li & 7u)] = xs0;
      tile[a_words + ((li + 256u) >> 3u) * kRowWords + (li & 7u)] = xs1;
      if (mode < Mode::Fetch) {  // the next step's registers, without a read
        ws = Expr<uvec4>(ws) + make_vec<u32>(1u, 1u, 1u, 1u);
        xs0 = Expr<uvec4>(xs0) + make_vec<u32>(1u, 1u, 1u, 1u);
        xs1 = Expr<uvec4>(xs1) + make_vec<u32>(1u, 1u, 1u, 1u);
      }
    }
    if (mode >= Mode::Barriers) barrier();
    if (mode >= Mode::Fetch) fetch(step + 1u);
    for (uint32_t kk = 0; kk < 8; kk += K / 16) {
      if (mode != Mode::Mma) load(constant<u32>(kk));
      for (uint32_t i = 0; i < row_tiles; ++i)
        for (uint32_t j = 0; j < token_tiles; ++j) acc[i * token_tiles + j].mul_add(a[i], b[j]);
    }
  }, "step");
  auto at = let("out_at", k.workgroup_id().x() * (8 * row_tiles * token_tiles * M * N) +
                              k.subgroup_id() * (row_tiles * token_tiles * M * N));
  for (uint32_t i = 0; i < row_tiles * token_tiles; ++i) acc[i].store(out, at + i * M * N, N, MatrixLayout::RowMajor);
  return k.build();
}

void run_probe(benchmark::State& st, BenchSession& s, uint32_t n, Mode mode, uint32_t groups, uint32_t steps) {
  auto kernel = n == 8 ? probe<16, 8, 32>(mode, steps) : probe<16, 16, 32>(mode, steps);
  rt::Pipeline p = rt::make_pipeline(*s.ctx, kernel);
  rt::Buffer w(*s.ctx, 2560ull * 640 + 64, {false, "w"}), x(*s.ctx, 512ull * 2560, {false, "x"});
  w.fill(0x55555555);
  x.fill(0x01010101);
  rt::Buffer out(*s.ctx, uint64_t{groups} * 8 * 32 * 32 * 4, {false, "out"});
  rt::Graph g(*s.ctx, {true, "coop_probe"});
  for (int i = 0; i < 16; ++i) g.dispatch(p, {w, x, out}, rt::Grid{groups});
  for (int i = 0; i < 3; ++i) g.submit_and_wait();
  const double ns = time_median_dispatch(st, g);
  st.counters["TOPS"] = 2.0 * groups * kRows * kTokens * 128.0 * steps / ns / 1e3;
}

}  // namespace

void register_coop_probe_benchmarks(BenchSession& s) {
  for (uint32_t n : {8u, 16u}) {
    if (s.target.subgroup_size != 32 || !s.target.has_matrix_shape({16, n, 32, ScalarKind::I8, ScalarKind::I32})) continue;
    // 1056 workgroups of 512 steps: 8 on each of an H100's SMs, long; 160 of 20: a 512-token
    // 2560 x 2560 prefill projection's 128 x 64 tiles.
    for (auto [groups, steps] : {std::pair{1056u, 512u}, std::pair{160u, 20u}, std::pair{1056u, 20u}})
      for (Mode mode : {Mode::Mma, Mode::LoadMma, Mode::Barriers, Mode::Stash, Mode::Fetch})
        benchmark::RegisterBenchmark(
            fmt::format("coop_probe/16x{}x32/{}/groups:{}/steps:{}", n, kModeNames[int(mode)], groups, steps).c_str(),
            [&s, n, mode, groups, steps](benchmark::State& st) { run_probe(st, s, n, mode, groups, steps); })
            ->UseManualTime()->Iterations(5)->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace bdsl::bench
