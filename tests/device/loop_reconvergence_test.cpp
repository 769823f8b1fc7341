// A subgroup reduction after a loop whose trip count differs between lanes, the shape of the
// prefill matmul's chunk loop (ops/ternary/ternary_row_dots.cpp): lanes below `chunks` run one pass, the
// others none, then every lane takes subgroup_add of its accumulators. Each lane writes its own
// accumulators and every reduction it saw, so the host can tell "a lane's loop result was lost"
// from "the lanes did not reconverge before the reduction" (sums that differ between lanes of
// one subgroup).
//
// The H100 gave a wrong prefill accumulator with 64 loop-carried accumulators (bench/RESULTS.md
// run 10, issue 22); the kernel here has the same shape with 16, 32 or 64, and a twin whose loop
// runs the same number of passes on every lane (out-of-range chunks counted 0), which keeps the
// lanes converged whatever the compiler does.
#include <numeric>

#include "device_test.h"
#include "ops/ternary/ternary_row_dots.h"

namespace bdsl::test {
namespace {
using namespace dsl;

constexpr uint32_t kWorkgroup = 64;
constexpr uint32_t kChunks = 4;  // uvec4 chunks of the row: lanes 0..3 have one each

// The CPU twin of ops::detail::masked_field.
uint32_t field_bytes(uint32_t w, uint32_t j) { return j == 0 ? (w >> 2) & 0x30303030u : w & (0x03030303u << (6 - 2 * j)); }

// Loop shapes: every lane runs the same passes (out-of-range chunks counted 0), or a lane runs
// its own chunks only (divergent); with each "token" of four accumulators updated under its own
// run-time condition (token < count, true for every token here), as the prefill matmul does.
enum class Shape { Uniform, Divergent, DivergentGuardedTokens };

Kernel field_sums_after_loop(uint32_t accumulators, Shape shape) {
  const bool uniform_trip_count = shape == Shape::Uniform;
  KernelBuilder k("field_sums_after_loop_" + std::to_string(accumulators) + "_" + std::to_string(int(shape)),
                  {kWorkgroup, 1, 1});
  auto w = k.buffer<uvec4>("w", Access::Read);
  auto q = k.buffer<uvec4>("q", Access::Read);
  auto lanes = k.buffer<i32>("lanes", Access::Write);
  auto sums = k.buffer<i32>("sums", Access::Write);
  auto count = k.push<u32>("count");
  std::vector<Var<i32>> acc;
  for (uint32_t a = 0; a < accumulators; ++a) acc.push_back(k.var<i32>("acc" + std::to_string(a), 0));
  auto lane = k.subgroup_invocation();
  auto sg = k.subgroup_size();
  auto add_chunk = [&](Expr<u32> c, std::optional<Expr<boolean>> valid) {
    auto cc = min(c, constant<u32>(kChunks - 1));
    auto wv = let("wv", Expr<uvec4>(w[cc]));
    for (uint32_t token = 0; token < accumulators / 4; ++token) {
      auto body = [&] {
        auto qv = let("qv", Expr<uvec4>(q[cc * (accumulators / 4) + token]));
        for (uint32_t a = 4 * token; a < 4 * token + 4; ++a) {
          std::vector<Expr<i32>> terms;
          for (uint32_t m = 0; m < 4; ++m) terms.push_back(sdot4x8(ops::detail::masked_field(wv.lane(m), a % 4), qv.lane(m)));
          Expr<i32> dot = (terms[0] + terms[1]) + (terms[2] + terms[3]);
          acc[a] += valid ? select(*valid, dot, constant<i32>(0)) : dot;
        }
      };
      if (shape == Shape::DivergentGuardedTokens)
        if_(constant<u32>(token) < count, body);
      else
        body();
    }
  };
  if (uniform_trip_count)
    for_range(0u, constant<u32>(kChunks), sg, [&](Expr<u32> c0) { add_chunk(c0 + lane, let("c_valid", c0 + lane < kChunks)); }, "chunk");
  else
    for_range(lane, constant<u32>(kChunks), sg, [&](Expr<u32> c) { add_chunk(c, std::nullopt); }, "chunk");
  auto me = k.local_index();
  for (uint32_t a = 0; a < accumulators; ++a) {
    lanes[me * accumulators + a] = Expr<i32>(acc[a]);
    sums[me * accumulators + a] = subgroup_add(Expr<i32>(acc[a]));
  }
  return k.build();
}

class LoopReconvergence : public DeviceTest, public ::testing::WithParamInterface<std::tuple<uint32_t, Shape>> {};

TEST_P(LoopReconvergence, EveryLaneSeesTheSumOfTheLoopResults) {
  const auto [accumulators, shape] = GetParam();
  const uint32_t sg = ctx().info().subgroup_size;
  ASSERT_EQ(kWorkgroup % sg, 0u);
  std::vector<uint32_t> w(kChunks * 4), q(kChunks * accumulators);
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint32_t(i * 2654435761u) & 0xaaaaaaaau;  // codes 0 or 2
  for (size_t i = 0; i < q.size(); ++i) q[i] = uint32_t(i * 2246822519u + 12345u);     // any int8s
  rt::Pipeline p = pipeline(field_sums_after_loop(accumulators, shape));
  rt::Buffer wb = buffer_of(w, "w"), qb = buffer_of(q, "q");
  rt::Buffer lanes(ctx(), kWorkgroup * accumulators * 4, {false, "lanes"}), sums(ctx(), kWorkgroup * accumulators * 4, {false, "sums"});
  rt::Graph g(ctx());
  g.dispatch(p, {wb, qb, lanes, sums}, rt::push(accumulators / 4), rt::Grid{1});
  g.submit_and_wait();
  const auto got_lanes = lanes.download<int32_t>();
  const auto got_sums = sums.download<int32_t>();
  // Each subgroup does the same work: its lane c < kChunks takes chunk c.
  auto expected_lane = [&](uint32_t c, uint32_t a) {
    if (c >= kChunks) return 0;
    int32_t sum = 0;
    for (uint32_t m = 0; m < 4; ++m) {
      const uint32_t wf = field_bytes(w[c * 4 + m], a % 4), qw = q[(c * (accumulators / 4) + a / 4) * 4 + m];
      for (int b = 0; b < 4; ++b) sum += int32_t(int8_t(wf >> (8 * b))) * int32_t(int8_t(qw >> (8 * b)));
    }
    return sum;
  };
  int nonzero = 0;
  for (uint32_t first = 0; first < kWorkgroup; first += sg)
    for (uint32_t a = 0; a < accumulators; ++a) {
      int32_t want = 0;
      for (uint32_t l = first; l < first + sg; ++l) {
        ASSERT_EQ(got_lanes[l * accumulators + a], expected_lane(l - first, a)) << "lane " << l << "'s loop result, accumulator " << a;
        want += got_lanes[l * accumulators + a];
      }
      nonzero += want != 0;
      for (uint32_t l = first; l < first + sg; ++l)
        ASSERT_EQ(got_sums[l * accumulators + a], want) << "accumulator " << a << ", lane " << l << " of the subgroup at " << first;
    }
  EXPECT_GT(nonzero, 0);  // the data reaches the reductions
}

std::string shape_name(const ::testing::TestParamInfo<std::tuple<uint32_t, Shape>>& info) {
  static const char* const names[] = {"Uniform", "Divergent", "DivergentGuardedTokens"};
  return std::to_string(std::get<0>(info.param)) + names[int(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(Shapes, LoopReconvergence,
                         ::testing::Combine(::testing::Values(16u, 32u, 64u),
                                            ::testing::Values(Shape::Uniform, Shape::Divergent, Shape::DivergentGuardedTokens)),
                         shape_name);

}  // namespace
}  // namespace bdsl::test
