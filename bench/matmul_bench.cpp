// The prefill projections of one block of tokens, alone: the subgroup matmul against the
// tensor-core matmul over its tile shapes (which one the device likes, in int8 TOPS).
// `matmul/<rows>x<cols>/tokens:T/<engine>[/tile:RxT/sg:AxB[/db]]`, GPU time per dispatch; the
// tuning table's tile as `coopmat/table[/varied][/evicted]` (data of varied values; each dispatch
// after a 256 MB read, its code and data out of L2 as in a model's graph).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <array>
#include <optional>
#include <utility>
#include <vector>

#include "bench/bench_registry.h"
#include "golden/splitmix.h"
#include "ops/ternary.h"
#include "runtime/buffer.h"
#include "runtime/graph.h"
#include "runtime/kernel_pipeline.h"

namespace bdsl::bench {
namespace {

struct MatmulCase {
  uint32_t rows, cols, tokens;
  std::optional<ops::CoopMatmulOptions> coop;  // none: the subgroup matmul (ternary_matmul)
  bool varied = false;   // weights and activations of varied values (else one value throughout)
  bool evicted = false;  // each dispatch after a 256 MB read (its code and data out of L2)
};

// Words from a seed: I2_S codes 0-2 in every 2 bits (weights) or any int8 (activations).
std::vector<uint32_t> varied_words(uint64_t words, bool codes, uint64_t seed) {
  golden::SplitMix64 rng(seed);
  std::vector<uint32_t> out(words);
  for (auto& w : out) {
    if (!codes) {
      w = uint32_t(rng.next());
      continue;
    }
    w = 0;
    for (uint32_t i = 0; i < 16; ++i) w |= uint32_t(rng.next() % 3) << 2 * i;
  }
  return out;
}

void matmul(benchmark::State& st, BenchSession& s, const MatmulCase& c) {
  auto& ctx = *s.ctx;
  dsl::Kernel kernel = c.coop ? ops::ternary_matmul_coopmat(s.target, c.rows, c.cols, *c.coop)
                              : ops::ternary_matmul(s.target, c.rows, c.cols);
  const rt::Grid grid = c.coop ? rt::Grid{ops::ternary_matmul_coopmat_row_groups(s.target, c.rows, *c.coop),
                                          ops::ternary_matmul_coopmat_token_groups(s.target, c.tokens, *c.coop)}
                               : rt::Grid{ops::ternary_matvec_workgroups(s.target, c.rows, {}),
                                          ops::ternary_matmul_token_tiles(c.tokens)};
  rt::Pipeline p = rt::make_pipeline(ctx, kernel);
  rt::Buffer w(ctx, uint64_t{c.rows} * c.cols / 4 + 32, {false, "weights"});
  rt::Buffer q(ctx, uint64_t{c.tokens} * c.cols, {false, "x_q"}), act(ctx, c.tokens * 8ull, {false, "x_act"});
  if (c.varied) {
    auto words = varied_words(w.size() / 4, true, 1);
    words[uint64_t{c.rows} * c.cols / 16] = 0x3f800000;  // the scale, 1.0
    w.upload(words);
    q.upload(varied_words(q.size() / 4, false, 2));
  } else {
    w.fill(0x55555555);  // code 1 (zero) everywhere
    q.fill(0x01010101);
  }
  act.fill(0x3f800000);
  rt::Buffer y(ctx, uint64_t{c.rows} * c.tokens * 4, {false, "y"});
  rt::Graph g(ctx, {true, "matmul"});
  std::optional<L2Eviction> eviction;
  if (c.evicted) eviction.emplace(ctx);
  for (int i = 0; i < 32; ++i) {
    if (eviction) eviction->record(g);
    g.dispatch(p, {w, q, act, y}, rt::push(c.tokens), grid);
  }
  for (int i = 0; i < 3; ++i) g.submit_and_wait();  // clocks up before timing
  const double ns = time_median_dispatch(st, g, eviction ? 2 : 1);
  st.counters["TOPS"] = 2.0 * c.rows * c.cols * c.tokens / ns / 1e3;
  st.counters["workgroups"] = grid.x * grid.y;
}

}  // namespace

void register_matmul_benchmarks(BenchSession& s) {
  const bool coop = ops::ternary_matmul_coopmat_shape(s.target).has_value();
  const uint32_t dim = s.options.quick ? 512 : 2560, ffn = s.options.quick ? 1536 : 6912;
  const uint32_t tokens = s.options.quick ? 64 : 512;
  // {row subgroups, token subgroups, row tiles, token tiles, double buffer}
  const std::vector<std::array<uint32_t, 5>> tiles = {{4, 2, 2, 4, 0}, {2, 2, 4, 4, 0}, {2, 1, 4, 8, 0},
                                                      {4, 1, 2, 8, 0}, {4, 1, 2, 4, 0}, {4, 1, 2, 4, 1},
                                                      {4, 2, 1, 4, 0}, {4, 2, 1, 4, 1}, {2, 2, 2, 4, 1},
                                                      {4, 1, 1, 4, 0}, {2, 2, 1, 4, 0}};
  for (auto [rows, cols] : {std::pair{dim, dim}, std::pair{ffn, dim}, std::pair{dim, ffn}}) {
    std::vector<std::pair<std::string, MatmulCase>> cases = {{"subgroup", {rows, cols, tokens, std::nullopt}}};
    for (const auto& t : coop ? tiles : decltype(tiles){}) {
      ops::CoopMatmulOptions o;
      o.row_subgroups = t[0], o.token_subgroups = t[1], o.row_tiles = t[2], o.token_tiles = t[3];
      o.double_buffer = t[4] != 0;
      const auto shape = *ops::ternary_matmul_coopmat_shape(s.target);
      cases.push_back({fmt::format("coopmat/tile:{}x{}/sg:{}x{}{}", t[0] * t[2] * shape.m, t[1] * t[3] * shape.n, t[0],
                                   t[1], o.double_buffer ? "/db" : ""),
                       {rows, cols, tokens, o}});
    }
    // The table's tile on data of varied values, after a 256 MB read, and both.
    if (coop && !s.options.quick) {
      const auto table = ops::coop_tiles_for(s.target, rows, cols);
      for (auto [varied, evicted] : {std::pair{true, false}, {false, true}, {true, true}, {false, false}})
        cases.push_back({fmt::format("coopmat/table{}{}", varied ? "/varied" : "", evicted ? "/evicted" : ""),
                         {rows, cols, tokens, table, varied, evicted}});
    }
    // The same projection over 4x the tokens: 4x the workgroups (does the grid's size limit it?).
    if (coop && !s.options.quick)
      for (uint32_t row_tiles : {2u, 1u}) {
        ops::CoopMatmulOptions o;
        o.row_tiles = row_tiles;
        const auto shape = *ops::ternary_matmul_coopmat_shape(s.target);
        cases.push_back({fmt::format("coopmat/tile:{}x{}/sg:4x2", row_tiles * 4 * shape.m, 2 * o.token_tiles * shape.n),
                         {rows, cols, 2048, o}});
      }
    for (const auto& [name, c] : cases)
      benchmark::RegisterBenchmark(fmt::format("matmul/{}x{}/tokens:{}/{}", rows, cols, c.tokens, name).c_str(),
                                   [&s, c = c](benchmark::State& st) { matmul(st, s, c); })
          ->UseManualTime()->Iterations(s.options.quick ? 2 : 10)->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace bdsl::bench
