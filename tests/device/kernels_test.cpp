// Whole kernels on the device: control flow, shared memory with barriers, subgroup operations,
// atomics and the tutorial's kernels, each against the same computation on the CPU.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "codegen/glsl_printer.h"
#include "codegen/interface_of.h"
#include "device_test.h"
#include "ops/examples/saxpy.h"
#include "ops/examples/subgroup_softmax.h"
#include "ops/examples/workgroup_sum.h"

namespace bdsl::test {
namespace {
using namespace dsl;

class Kernels : public DeviceTest {};

TEST_F(Kernels, WhileLoopWithBreakAndContinue) {
  // Collatz steps until 1, capped at 500; even steps counted separately via continue.
  KernelBuilder k("collatz", {64, 1, 1});
  auto x = k.buffer<u32>("x", Access::Read);
  auto steps = k.buffer<u32>("steps", Access::Write);
  auto n = k.push<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] {
    auto v = k.var<u32>("v", x[i]);
    auto count = k.var<u32>("count", 0u);
    auto evens = k.var<u32>("evens", 0u);
    while_([&] { return v != 1u; }, [&] {
      count += 1u;
      if_(count > 500u, [&] { break_(); });
      if_((v & 1u) == 0u, [&] {
        v = v >> 1u;
        evens += 1u;
        continue_();
      });
      v = v * 3u + 1u;
    });
    steps[i] = count * 1000u + evens;
  });
  std::vector<uint32_t> in(300);
  std::iota(in.begin(), in.end(), 1u);
  rt::Buffer xb = buffer_of(in, "x"), out(ctx(), in.size() * 4, {false, "steps"});
  run(k.build(), {xb, out}, 5, rt::push(uint32_t(in.size())));
  const auto got = out.download<uint32_t>();
  for (size_t j = 0; j < in.size(); ++j) {
    uint32_t v = in[j], count = 0, evens = 0;
    while (v != 1) {
      if (++count > 500) break;
      if (v % 2 == 0) {
        v /= 2;
        ++evens;
        continue;
      }
      v = v * 3 + 1;
    }
    ASSERT_EQ(got[j], count * 1000 + evens) << "x = " << in[j];
  }
}

TEST_F(Kernels, ForRangeWithStepAndElse) {
  KernelBuilder k("stepped_sums", {64, 1, 1});
  auto out = k.buffer<i32>("out", Access::Write);
  auto n = k.push<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] {
    auto acc = k.var<i32>("acc", 0);
    for_range(cast<i32>(i) - 50, cast<i32>(i) + 7, 3, [&](Expr<i32> j) {
      if_(j < 0, [&] { acc -= j * 2; }).else_([&] { acc += j; });
    }, "j");
    out[i] = acc;
  });
  const uint32_t count = 100;
  rt::Buffer ob(ctx(), count * 4, {false, "out"});
  run(k.build(), {ob}, 2, rt::push(count));
  const auto got = ob.download<int32_t>();
  for (int32_t t = 0; t < int32_t(count); ++t) {
    int32_t acc = 0;
    for (int32_t j = t - 50; j < t + 7; j += 3) acc += j < 0 ? -j * 2 : j;
    ASSERT_EQ(got[t], acc) << t;
  }
}

TEST_F(Kernels, SaxpyMatchesTheCpu) {
  const uint32_t n = 1000;
  std::vector<float> x(n), y(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = 0.25f * float(i), y[i] = 3.0f - float(i);
  rt::Buffer xb = buffer_of(x, "x"), yb = buffer_of(y, "y");
  run(ops::saxpy(), {xb, yb}, (n + 255) / 256, rt::push(n, 1.5f));
  const auto got = yb.download<float>();
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 1.5f * x[i] + y[i]) << i;
}

TEST_F(Kernels, WorkgroupSumThroughSharedMemory) {
  const uint32_t n = 5000, wg = 128, groups = (n + wg - 1) / wg;
  std::vector<float> x(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = float(int(i % 17) - 8);  // small integers: sums exact
  rt::Buffer xb = buffer_of(x, "x"), sums(ctx(), groups * 4, {false, "sums"});
  run(ops::workgroup_sum(wg), {xb, sums}, groups, rt::push(n));
  const auto got = sums.download<float>();
  for (uint32_t g = 0; g < groups; ++g) {
    float want = 0;
    for (uint32_t i = g * wg; i < std::min(n, (g + 1) * wg); ++i) want += x[i];
    ASSERT_EQ(got[g], want) << "workgroup " << g;
  }
}

TEST_F(Kernels, SubgroupSoftmaxMatchesTheCpu) {
  const uint32_t rows = 37, cols = 301, wg = 64;
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.37f) * 6.0f;
  rt::Buffer xb = buffer_of(x, "x"), yb(ctx(), x.size() * 4, {false, "y"});
  const uint32_t per_group = wg / ctx().info().subgroup_size;
  run(ops::subgroup_softmax(wg), {xb, yb}, (rows + per_group - 1) / per_group, rt::push(rows, cols));
  const auto got = yb.download<float>();
  for (uint32_t r = 0; r < rows; ++r) {
    float m = -INFINITY, s = 0;
    for (uint32_t c = 0; c < cols; ++c) m = std::max(m, x[r * cols + c]);
    for (uint32_t c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (uint32_t c = 0; c < cols; ++c) {
      const float want = std::exp(x[r * cols + c] - m) / s;
      ASSERT_NEAR(got[r * cols + c], want, 1e-5f * want + 1e-9f) << r << "," << c;  // exp: 3 ulp, sums reordered
    }
  }
}

TEST_F(Kernels, SubgroupOperationsAgreeWithTheirDefinition) {
  KernelBuilder k("subgroup_ops", {64, 1, 1});
  auto out = k.buffer<u32>("out", Access::Write);
  auto lane = k.subgroup_invocation();
  auto v = lane * 3u + 1u;
  auto base = k.global_id().x() * 8u;
  out[base + 0u] = subgroup_add(v);
  out[base + 1u] = subgroup_max(v);
  out[base + 2u] = subgroup_min(v);
  out[base + 3u] = subgroup_shuffle_xor(v, 1u);
  out[base + 4u] = subgroup_broadcast(v, 0u);
  out[base + 5u] = subgroup_shuffle(v, (lane + 1u) % k.subgroup_size());
  out[base + 6u] = select(subgroup_elect(), 1u, 0u);
  out[base + 7u] = k.subgroup_size();
  rt::Buffer ob(ctx(), 64 * 8 * 4, {false, "out"});
  run(k.build(), {ob}, 1, rt::push());
  const auto got = ob.download<uint32_t>();
  const uint32_t size = got[7];
  ASSERT_EQ(size, ctx().info().subgroup_size);
  for (uint32_t t = 0; t < 64; ++t) {
    const uint32_t l = t % size, first = 1;
    uint32_t sum = 0;
    for (uint32_t j = 0; j < size; ++j) sum += j * 3 + 1;
    const uint32_t* o = &got[t * 8];
    EXPECT_EQ(o[0], sum) << t;
    EXPECT_EQ(o[1], (size - 1) * 3 + 1) << t;
    EXPECT_EQ(o[2], first) << t;
    EXPECT_EQ(o[3], (l ^ 1) * 3 + 1) << t;
    EXPECT_EQ(o[4], first) << t;
    EXPECT_EQ(o[5], ((l + 1) % size) * 3 + 1) << t;
    EXPECT_EQ(o[6], l == 0 ? 1u : 0u) << t;
  }
}

// subgroup_barrier: each subgroup writes its own slots of shared memory, then every lane reads its
// neighbour's after the subgroup's barrier alone (as a tensor-core result read back by lanes).
// Several rounds over the same slots, so a missing barrier would read a stale round; the GLSL says
// subgroupBarrier, not barrier.
TEST_F(Kernels, SubgroupBarrierOrdersTheSubgroupsSharedMemory) {
  const uint32_t wg = 64, rounds = 8;
  KernelBuilder k("subgroup_barrier_rounds", {wg, 1, 1});
  auto out = k.buffer<u32>("out", Access::Write);
  auto slots = k.shared<u32>("slots", wg);
  auto lid = k.local_index();
  auto lane = k.subgroup_invocation();
  auto first = let("first", lid - lane);  // the subgroup's first slot
  auto total = k.var<u32>("total", 0u);
  for_range(0u, rounds, [&](Expr<u32> r) {
    slots[lid] = lid * 1000u + r;
    subgroup_barrier();
    total = Expr<u32>(total) + Expr<u32>(slots[first + (lane + 1u) % k.subgroup_size()]);
    subgroup_barrier();  // the reads are done before the next round's writes
  }, "round");
  out[k.global_id().x()] = Expr<u32>(total);
  const dsl::Kernel kernel = k.build();
  const std::string glsl = codegen::print_glsl(kernel);
  EXPECT_NE(glsl.find("subgroupBarrier();"), std::string::npos);
  EXPECT_EQ(glsl.find(" barrier();"), std::string::npos);
  rt::Buffer ob(ctx(), wg * 4, {false, "out"});
  run(kernel, {ob}, 1, rt::push());
  const auto got = ob.download<uint32_t>();
  const uint32_t size = ctx().info().subgroup_size;
  for (uint32_t t = 0; t < wg; ++t) {
    const uint32_t neighbour = t - t % size + (t % size + 1) % size;
    uint32_t want = 0;
    for (uint32_t r = 0; r < rounds; ++r) want += neighbour * 1000 + r;
    EXPECT_EQ(got[t], want) << "invocation " << t;
  }
}

// Scans, ballots and relative shuffles (issue 24): each lane's result against its definition over
// the lanes before or after it.
TEST_F(Kernels, SubgroupScansBallotsAndRelativeShufflesAgreeWithTheirDefinition) {
  KernelBuilder k("subgroup_scans", {64, 1, 1});
  auto out = k.buffer<u32>("out", Access::Write);
  auto lane = k.subgroup_invocation();
  auto v = let("v", (lane * 7u) % 11u + 1u);  // not monotonic, so min and max scans move
  auto base = k.global_id().x() * 9u;
  out[base + 0u] = subgroup_inclusive_add(v);
  out[base + 1u] = subgroup_inclusive_min(v);
  out[base + 2u] = subgroup_inclusive_max(v);
  out[base + 3u] = subgroup_exclusive_add(v);
  auto ballot = let("ballot", subgroup_ballot(lane % 3u == 0u));
  out[base + 4u] = subgroup_ballot_bit_count(ballot);
  out[base + 5u] = ballot.x();
  out[base + 6u] = subgroup_shuffle_up(v, 1u);
  out[base + 7u] = subgroup_shuffle_down(v, 2u);
  out[base + 8u] = k.subgroup_size();
  const Kernel kernel = k.build();
  EXPECT_TRUE(codegen::interface_of(kernel).features.subgroup_shuffle_relative);
  rt::Buffer ob(ctx(), 64 * 9 * 4, {false, "out"});
  run(kernel, {ob}, 1, rt::push());
  const auto got = ob.download<uint32_t>();
  const uint32_t size = got[8];
  ASSERT_EQ(size, ctx().info().subgroup_size);
  auto value = [](uint32_t l) { return (l * 7) % 11 + 1; };
  uint32_t count = 0, bits = 0;
  for (uint32_t l = 0; l < size; ++l)
    if (l % 3 == 0) ++count, bits |= l < 32 ? 1u << l : 0u;
  for (uint32_t t = 0; t < 64; ++t) {
    const uint32_t l = t % size;
    uint32_t sum = 0, lo = UINT32_MAX, hi = 0;
    for (uint32_t j = 0; j <= l; ++j) sum += value(j), lo = std::min(lo, value(j)), hi = std::max(hi, value(j));
    const uint32_t* o = &got[t * 9];
    EXPECT_EQ(o[0], sum) << t;
    EXPECT_EQ(o[1], lo) << t;
    EXPECT_EQ(o[2], hi) << t;
    EXPECT_EQ(o[3], sum - value(l)) << t;
    EXPECT_EQ(o[4], count) << t;
    EXPECT_EQ(o[5], bits) << t;
    if (l >= 1) { EXPECT_EQ(o[6], value(l - 1)) << t; }
    if (l + 2 < size) { EXPECT_EQ(o[7], value(l + 2)) << t; }
  }
}

// tanh, erf (composed from exp: GLSL has none), ceil, sign and mix against the C library.
TEST_F(Kernels, MathBuiltinsMatchTheCpu) {
  KernelBuilder k("math_builtins", {64, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto out = k.buffer<f32>("out", Access::Write);
  auto ints = k.buffer<i32>("ints", Access::Write);
  auto n = k.push<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] {
    auto v = let("v", Expr<f32>(x[i]));
    out[i * 6u + 0u] = tanh(v);
    out[i * 6u + 1u] = erf(v);
    out[i * 6u + 2u] = ceil(v);
    out[i * 6u + 3u] = sign(v);
    out[i * 6u + 4u] = mix(v, v * 3.0f + 1.0f, 0.25f);
    out[i * 6u + 5u] = mix(make_vec<f32>(v, 1.0f), make_vec<f32>(2.0f, v), make_vec<f32>(0.5f, 0.75f)).y();
    ints[i] = sign(cast<i32>(v));
  });
  std::vector<float> values = {0.0f, -0.0f, 0.5f, -0.5f, 1.0f, -1.25f, 2.5f, -3.75f, 4.0f, 9.5f, -20.0f, 100.0f, -100.0f, 1e-6f};
  for (int j = -40; j <= 40; ++j) values.push_back(j * 0.1f + 0.0123f);
  const uint32_t count = uint32_t(values.size());
  rt::Buffer xb(ctx(), count * 4, {false, "x"}), ob(ctx(), count * 6 * 4, {false, "out"}), ib(ctx(), count * 4, {false, "ints"});
  xb.upload(values);
  run(k.build(), {xb, ob, ib}, (count + 63) / 64, rt::push(count));
  const auto got = ob.download<float>();
  const auto got_ints = ib.download<int32_t>();
  for (uint32_t j = 0; j < count; ++j) {
    const float v = values[j];
    const float* o = &got[j * 6];
    EXPECT_NEAR(o[0], std::tanh(v), 2e-6) << "tanh " << v;
    EXPECT_NEAR(o[1], std::erf(v), 5e-7) << "erf " << v;
    EXPECT_EQ(o[2], std::ceil(v)) << "ceil " << v;
    EXPECT_EQ(o[3], v > 0 ? 1.0f : v < 0 ? -1.0f : 0.0f) << "sign " << v;
    const float b = v * 3.0f + 1.0f;
    EXPECT_NEAR(o[4], v * 0.75f + b * 0.25f, 1e-5f * (1 + std::abs(b))) << "mix " << v;
    EXPECT_NEAR(o[5], 1.0f * 0.25f + v * 0.75f, 1e-5f * (1 + std::abs(v))) << "mix of vectors " << v;
    const int32_t iv = int32_t(v);
    EXPECT_EQ(got_ints[j], iv > 0 ? 1 : iv < 0 ? -1 : 0) << "sign of int " << iv;
  }
}

TEST_F(Kernels, AtomicsOnBuffersAndSharedMemory) {
  KernelBuilder k("histogram", {64, 1, 1});
  auto x = k.buffer<u32>("x", Access::Read);
  auto bins = k.buffer<u32>("bins", Access::ReadWrite);
  auto stats = k.buffer<u32>("stats", Access::ReadWrite);
  auto n = k.push<u32>("n");
  auto local = k.shared<u32>("local_bins", 16);
  auto lid = k.local_index();
  auto i = k.global_id().x();
  if_(lid < 16u, [&] { local[lid] = 0u; });
  barrier();
  if_(i < n, [&] {
    atomic_add(local[x[i] % 16u], 1u);
    atomic_max(stats[0u], x[i]);
    atomic_min(stats[1u], x[i]);
    auto before = atomic_add(stats[2u], 1u);  // previous value: unique ticket per invocation
    atomic_or(stats[3u], 1u << (before % 32u));
  });
  barrier();
  if_(lid < 16u, [&] { atomic_add(bins[lid], local[lid]); });
  const uint32_t count = 1000;
  std::vector<uint32_t> in(count);
  for (uint32_t j = 0; j < count; ++j) in[j] = (j * 2654435761u) >> 7;
  rt::Buffer xb = buffer_of(in, "x"), bb = buffer_of(std::vector<uint32_t>(16, 0), "bins");
  rt::Buffer sb = buffer_of(std::vector<uint32_t>{0u, UINT32_MAX, 0u, 0u}, "stats");
  run(k.build(), {xb, bb, sb}, (count + 63) / 64, rt::push(count));
  std::vector<uint32_t> want(16, 0);
  for (uint32_t v : in) want[v % 16]++;
  EXPECT_EQ(bb.download<uint32_t>(), want);
  const auto s = sb.download<uint32_t>();
  EXPECT_EQ(s[0], *std::max_element(in.begin(), in.end()));
  EXPECT_EQ(s[1], *std::min_element(in.begin(), in.end()));
  EXPECT_EQ(s[2], count);
  EXPECT_EQ(s[3], UINT32_MAX);  // tickets 0..999 cover every bit position
}

// Float atomic_add on a buffer and in shared memory; small integers, so every order sums exactly.
TEST_F(Kernels, FloatAtomicAddSumsEveryInvocation) {
  if (!ctx().info().float_atomic_add_buffer || !ctx().info().float_atomic_add_shared)
    GTEST_SKIP() << "the device lacks shaderBufferFloat32AtomicAdd or shaderSharedFloat32AtomicAdd";
  KernelBuilder k("float_sums", {64, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto sums = k.buffer<f32>("sums", Access::ReadWrite);  // [0]: the total, [1 + g]: workgroup g's
  auto n = k.push<u32>("n");
  auto local = k.shared<f32>("local", 1);
  auto i = k.global_id().x();
  if_(k.local_index() == 0u, [&] { local[0u] = 0.0f; });
  barrier();
  if_(i < n, [&] {
    atomic_add(sums[0u], x[i]);
    atomic_add(local[0u], x[i]);
  });
  barrier();
  if_(k.local_index() == 0u, [&] { sums[1u + k.workgroup_id().x()] = local[0u]; });
  const uint32_t count = 1000, groups = (count + 63) / 64;
  std::vector<float> in(count);
  for (uint32_t j = 0; j < count; ++j) in[j] = float(int(j % 13) - 6);
  rt::Buffer xb = buffer_of(in, "x"), sb = buffer_of(std::vector<float>(1 + groups, 0.0f), "sums");
  run(k.build(), {xb, sb}, groups, rt::push(count));
  const auto got = sb.download<float>();
  EXPECT_EQ(got[0], std::accumulate(in.begin(), in.end(), 0.0f));
  for (uint32_t g = 0; g < groups; ++g) {
    float want = 0;
    for (uint32_t j = g * 64; j < std::min(count, (g + 1) * 64); ++j) want += in[j];
    EXPECT_EQ(got[1 + g], want) << "workgroup " << g;
  }
}

// u64/i64 arithmetic, literals, conversions and 64-bit buffer elements against the CPU.
TEST_F(Kernels, SixtyFourBitIntegersMatchTheCpu) {
  if (!ctx().info().int64) GTEST_SKIP() << "the device lacks shaderInt64";
  KernelBuilder k("wide", {64, 1, 1});
  auto x = k.buffer<u32>("x", Access::Read);
  auto big = k.buffer<u64>("big", Access::Read);
  auto out = k.buffer<u64>("out", Access::Write);
  auto signed_out = k.buffer<i64>("signed_out", Access::Write);
  auto n = k.push<u32>("n");
  auto i = k.global_id().x();
  if_(i < n, [&] {
    const Expr<u64> v = cast<u64>(x[i]);
    out[i] = v * v + big[i] + (v << 33ul) + 0xffffffff00000000ul / (v + 1ul);
    const Expr<i64> s = cast<i64>(x[i]) - 3000000000l;
    signed_out[i] = s * 7l + min(s, -5l) - constant<i64>(INT64_MIN) / 4l;
  });
  const uint32_t count = 300;
  std::vector<uint32_t> in(count);
  std::vector<uint64_t> bigs(count);
  for (uint32_t j = 0; j < count; ++j) in[j] = j * 2654435761u, bigs[j] = uint64_t{j} << 50;
  rt::Buffer xb = buffer_of(in, "x"), bb = buffer_of(bigs, "big");
  rt::Buffer ob(ctx(), count * 8, {false, "out"}), sb(ctx(), count * 8, {false, "signed_out"});
  run(k.build(), {xb, bb, ob, sb}, (count + 63) / 64, rt::push(count));
  const auto got = ob.download<uint64_t>();
  const auto got_signed = sb.download<int64_t>();
  for (uint32_t j = 0; j < count; ++j) {
    const uint64_t v = in[j];
    ASSERT_EQ(got[j], v * v + bigs[j] + (v << 33) + 0xffffffff00000000ull / (v + 1)) << j;
    const int64_t s = int64_t(in[j]) - 3000000000ll;
    ASSERT_EQ(got_signed[j], s * 7 + std::min<int64_t>(s, -5) - INT64_MIN / 4) << j;
  }
}

// f64 arithmetic, literals, conversions, sqrt, a subgroup sum and shared elements against the CPU:
// each f32 widened, squared in f64, every subgroup's squares summed, and the sum narrowed again.
TEST_F(Kernels, SixtyFourBitFloatsMatchTheCpu) {
  if (!ctx().info().float64) GTEST_SKIP() << "the device lacks shaderFloat64";
  const uint32_t sg = ctx().info().subgroup_size;
  KernelBuilder k("double_sums", {64, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto out = k.buffer<f32>("out", Access::Write);
  auto parts = k.shared<f64>("parts", 64);
  auto i = k.global_id().x();
  auto lid = k.local_index();
  const Expr<f64> v = cast<f64>(Expr<f32>(x[i]));
  parts[lid] = sqrt(v * v) * constant<f64>(1.0 / 3.0) + 0.25;
  barrier();
  auto sq = let("sq", v * v);
  auto total = let("total", subgroup_add(sq));
  out[i * 3u] = cast<f32>(Expr<f64>(parts[lid]));
  out[i * 3u + 1u] = cast<f32>(total);
  out[i * 3u + 2u] = select(total / constant<f64>(3.0) > constant<f64>(1e10), 1.0f, 0.0f);
  const uint32_t count = 128;
  std::vector<float> in(count);
  for (uint32_t j = 0; j < count; ++j) in[j] = std::ldexp(float(j + 1) * 1.37f, int(j % 40) - 20);
  rt::Buffer xb = buffer_of(in, "x"), ob(ctx(), count * 12, {false, "out"});
  run(k.build(), {xb, ob}, count / 64, {});
  const auto got = ob.download<float>();
  for (uint32_t j = 0; j < count; ++j) {
    const double d = in[j];
    EXPECT_EQ(got[j * 3], float(std::sqrt(d * d) * (1.0 / 3.0) + 0.25)) << j;
    // The subgroup's sum in any order: the squares of f32s are exact in f64 and their sum within
    // 2^-50 of exact, far inside f32's rounding unless it lands on a tie, which these inputs do not.
    double sum = 0;
    for (uint32_t m = j / sg * sg; m < j / sg * sg + sg; ++m) sum += double(in[m]) * double(in[m]);
    EXPECT_EQ(got[j * 3 + 1], float(sum)) << j;
    EXPECT_EQ(got[j * 3 + 2], sum / 3.0 > 1e10 ? 1.0f : 0.0f) << j;
  }
}

// A 2-D shared tile (padded to 17 columns) transposes 16 x 16 blocks of a matrix.
TEST_F(Kernels, TwoDimensionalSharedTileTransposes) {
  KernelBuilder k("transpose", {16, 16, 1});
  auto a = k.buffer<f32>("a", Access::Read);
  auto t = k.buffer<f32>("t", Access::Write);
  auto cols = k.push<u32>("cols");
  auto rows = k.push<u32>("rows");
  auto tile = k.shared<f32>("tile", 16, 17);
  auto lx = k.local_id().x(), ly = k.local_id().y();
  auto bx = k.workgroup_id().x() * 16u, by = k.workgroup_id().y() * 16u;
  tile[ly][lx] = a[(by + ly) * cols + bx + lx];
  barrier();
  t[(bx + ly) * rows + by + lx] = tile.at(lx, ly);
  const uint32_t r = 48, c = 32;
  std::vector<float> in(r * c);
  for (uint32_t j = 0; j < r * c; ++j) in[j] = float(j);
  rt::Buffer ab = buffer_of(in, "a"), tb(ctx(), r * c * 4, {false, "t"});
  rt::Pipeline p = pipeline(k.build());
  rt::Graph g(ctx());
  g.dispatch(p, {ab, tb}, rt::push(c, r), rt::Grid{c / 16, r / 16, 1});
  g.submit_and_wait();
  const auto got = tb.download<float>();
  for (uint32_t i = 0; i < r; ++i)
    for (uint32_t j = 0; j < c; ++j) ASSERT_EQ(got[j * r + i], in[i * c + j]) << i << "," << j;
}

TEST_F(Kernels, AtomicCompSwapClaimsASlotOnce) {
  KernelBuilder k("claim", {64, 1, 1});
  auto owner = k.buffer<u32>("owner", Access::ReadWrite);
  auto won = k.buffer<u32>("won", Access::Write);
  auto i = k.global_id().x();
  auto previous = atomic_comp_swap(owner[0u], 0u, i + 1u);
  won[i] = select(previous == 0u, 1u, 0u);
  rt::Buffer ob = buffer_of(std::vector<uint32_t>{0u}, "owner"), wb(ctx(), 256 * 4, {false, "won"});
  run(k.build(), {ob, wb}, 4, rt::push());
  const auto w = wb.download<uint32_t>();
  EXPECT_EQ(std::accumulate(w.begin(), w.end(), 0u), 1u);
  const uint32_t winner = ob.download<uint32_t>()[0];
  ASSERT_GE(winner, 1u);
  EXPECT_EQ(w[winner - 1], 1u);
}

}  // namespace
}  // namespace bdsl::test

namespace bdsl::test {
namespace {

// Workgroups hand results to the last one to finish through a coherent buffer and an atomic
// ticket: the pattern split-K kernels use to combine partials in the same dispatch.
TEST_F(Kernels, CoherentBufferLetsTheLastWorkgroupCombine) {
  using namespace dsl;
  KernelBuilder k("last_combines", {64, 1, 1});
  auto partial = k.coherent_buffer<u32>("partial", Access::ReadWrite);
  auto ticket = k.buffer<u32>("ticket", Access::ReadWrite);
  auto total = k.buffer<u32>("total", Access::Write);
  auto groups = k.num_workgroups().x();
  auto g = k.workgroup_id().x();
  auto flag = k.shared<u32>("is_last", 1);
  if_(k.local_index() == 0u, [&] {
    partial[g] = (g + 1u) * 10u;
    memory_barrier_buffer();
    flag[0u] = select(atomic_add(ticket[0u], 1u) == groups - 1u, 1u, 0u);
  });
  barrier();
  if_(k.local_index() == 0u && flag[0u] == 1u, [&] {
    auto sum = k.var<u32>("sum", 0u);
    for_range(0u, groups, [&](Expr<u32> i) { sum += partial[i]; });
    total[0u] = sum;
  });
  rt::Buffer pb(ctx(), 64 * 4, {false, "partial"}), tb = buffer_of(std::vector<uint32_t>{0}, "ticket"),
      out(ctx(), 4, {false, "total"});
  run(k.build(), {pb, tb, out}, 64, rt::push());
  EXPECT_EQ(out.download<uint32_t>()[0], 10u * 64 * 65 / 2);
}

}  // namespace
}  // namespace bdsl::test
