// Graph parameters: values and grids the host sets between replays of one recording
// (KernelBuilder::param, Graph::parameter, Graph::grid_parameter), and typed host buffers.
#include <algorithm>

#include "codegen/glsl_printer.h"
#include "device_test.h"
#include "runtime/typed_buffer.h"
#include "vulkan_test.h"

namespace bdsl::test {
using rt::error_of;
}

namespace bdsl::test {
namespace {
using namespace dsl;

// y[i] = a * x[i] + bias for i < n; n, a and bias are parameters.
Kernel scale_kernel() {
  KernelBuilder k("scale", {64, 1, 1});
  auto x = k.buffer<f32>("x", Access::Read);
  auto y = k.buffer<f32>("y", Access::Write);
  auto n = k.param<u32>("n");
  auto a = k.param<f32>("a");
  auto bias = k.param<i32>("bias");
  auto i = k.global_id().x();
  if_(i < n, [&] { y[i] = a * x[i] + cast<f32>(bias); });
  return k.build();
}

using GraphParameters = DeviceTest;

TEST_F(GraphParameters, KernelReadsItsParametersFromTheGraphsWords) {
  const std::string glsl = codegen::print_glsl(scale_kernel());
  EXPECT_NE(glsl.find("readonly buffer parameters_block { uint parameters[]; };"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("uintBitsToFloat(parameters[pc.a])"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("int(parameters[pc.bias])"), std::string::npos) << glsl;
}

TEST_F(GraphParameters, ReplaysTakeNewValuesAndGridsWithoutRecordingAgain) {
  const uint32_t cap = 1000;
  std::vector<float> xs(cap);
  for (uint32_t j = 0; j < cap; ++j) xs[j] = float(j) * 0.5f;
  rt::TypedBuffer<float> x(ctx(), xs, {.name = "x"}), y(ctx(), cap, {.name = "y"});
  rt::Pipeline p = pipeline(scale_kernel());
  rt::Graph g(ctx());
  auto n = g.parameter<uint32_t>(100);
  auto a = g.parameter(2.0f);
  auto bias = g.parameter<int32_t>(-3);
  auto groups = g.grid_parameter({(100 + 63) / 64, 1, 1});
  g.fill(y, 0);
  g.dispatch(p, {x, y}, rt::push(n, a, bias), groups);
  const auto check = [&](uint32_t count, float scale, int32_t offset) {
    const std::vector<float> got = y.download();
    for (uint32_t j = 0; j < cap; ++j)
      ASSERT_EQ(got[j], j < count ? scale * xs[j] + float(offset) : 0.0f) << "element " << j << " of n = " << count;
  };
  g.submit_and_wait();
  check(100, 2.0f, -3);
  for (uint32_t count : {1000u, 1u, 513u}) {
    n.set(count);
    a.set(float(count) / 8);
    bias.set(int32_t(count) - 500);
    groups.set({(count + 63) / 64, 1, 1});
    g.submit_and_wait();
    check(count, float(count) / 8, int32_t(count) - 500);
  }
  EXPECT_EQ(n.get(), 513u);
  EXPECT_EQ(a.get(), 513.0f / 8);
  EXPECT_EQ(groups.get().x, 9u);
  groups.set({0, 1, 1});  // no workgroups: the dispatch does nothing
  g.submit_and_wait();
  check(0, 0, 0);
  EXPECT_EQ(g.stats().dispatches, 1u);
}

TEST_F(GraphParameters, SettingAParameterWaitsForTheReplaysInFlight) {
  rt::TypedBuffer<float> x(ctx(), std::vector<float>(4096, 1.0f), {.name = "x"}), y(ctx(), 4096, {.name = "y"});
  rt::Pipeline p = pipeline(scale_kernel());
  rt::Graph g(ctx());
  auto n = g.parameter<uint32_t>(4096);
  auto a = g.parameter(1.0f);
  auto bias = g.parameter<int32_t>(0);
  g.dispatch(p, {x, y}, rt::push(n, a, bias), rt::Grid{64});
  for (int r = 0; r < 20; ++r) {
    g.submit();
    a.set(float(r + 2));  // the replay just submitted must still read r + 1
  }
  g.wait(g.last_ticket());
  EXPECT_EQ(y.download(0, 1)[0], 20.0f);
  g.submit_and_wait();
  EXPECT_EQ(y.download(4095, 1)[0], 21.0f);
}

TEST_F(GraphParameters, MisuseIsRefusedNamingTheKernelAndTheField) {
  rt::TypedBuffer<float> x(ctx(), 64, {.name = "x"}), y(ctx(), 64, {.name = "y"});
  rt::Pipeline p = pipeline(scale_kernel());
  rt::Graph g(ctx()), other(ctx());
  auto n = g.parameter<uint32_t>(64);
  auto a = g.parameter(1.0f);
  auto bias = g.parameter<int32_t>(0);
  std::string m = error_of([&] { g.dispatch(p, {x, y}, rt::push(64u, 1.0f, 0), rt::Grid{1}); });
  EXPECT_NE(m.find("kernel 'scale' expects push constants (parameter u32, parameter f32, parameter i32) but the "
                   "dispatch passed (u32, f32, i32)"), std::string::npos) << m;
  m = error_of([&] { g.dispatch(p, {x, y}, rt::push(a, n, bias), rt::Grid{1}); });
  EXPECT_NE(m.find("but the dispatch passed (parameter f32, parameter u32, parameter i32)"), std::string::npos) << m;
  m = error_of([&] { other.dispatch(p, {x, y}, rt::push(n, a, bias), rt::Grid{1}); });
  EXPECT_NE(m.find("parameter 'n' is another graph's"), std::string::npos) << m;
  m = error_of([&] { g.dispatch(p, {{"x", x}, {"y", y}, {"parameters", x}}, rt::push(n, a, bias), rt::Grid{1}); });
  EXPECT_NE(m.find("binding 'parameters' holds the graph's parameters; the graph binds it itself"), std::string::npos) << m;
  auto groups = g.grid_parameter({1, 1, 1});
  m = error_of([&] { other.dispatch(p, {x, y}, rt::push(), groups); });
  EXPECT_NE(m.find("its grid parameter is another graph's"), std::string::npos) << m;
  const uint32_t too_many = ctx().info().max_workgroup_count[0] + 1u;
  m = error_of([&] { groups.set({too_many, 1, 1}); });
  EXPECT_NE(m.find("is outside 0.." + std::to_string(too_many - 1) + " in dimension x"), std::string::npos) << m;
  g.dispatch(p, {{"y", y}, {"x", x}}, rt::push(n, a, bias), groups);  // by name, the parameters left out
  g.finish();
  m = error_of([&] { g.parameter(1.0f); });
  EXPECT_NE(m.find("a new parameter after finish()"), std::string::npos) << m;
}

TEST_F(GraphParameters, TypedBuffersCountElementsAndKnowTheirKind) {
  rt::TypedBuffer<uint32_t> words(ctx(), std::vector<uint32_t>{1, 2, 3, 4, 5, 6}, {.name = "words"});
  EXPECT_EQ(words.size(), 6u);
  words.upload(std::vector<uint32_t>{9, 8}, 4);
  EXPECT_EQ(words.download(), (std::vector<uint32_t>{1, 2, 3, 4, 9, 8}));
  EXPECT_EQ(words.download(1, 2), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(words.slice(2, 3).offset, 8u);
  EXPECT_EQ(words.slice(2, 3).bytes, 12u);
  std::string m = error_of([&] { words.upload(std::vector<uint32_t>{1, 2, 3}, 4); });
  EXPECT_NE(m.find("buffer 'words': upload of elements 4..7 is outside its 6"), std::string::npos) << m;
  m = error_of([&] { (void)words.slice(6, 1); });
  EXPECT_NE(m.find("slice of elements 6..7 is outside its 6"), std::string::npos) << m;
  // The kernel reads f32 where this buffer holds u32: refused at the dispatch.
  rt::TypedBuffer<float> y(ctx(), 6, {.name = "y"});
  rt::Pipeline p = pipeline(scale_kernel());
  rt::Graph g(ctx());
  auto n = g.parameter<uint32_t>(6);
  auto a = g.parameter(1.0f);
  auto bias = g.parameter<int32_t>(0);
  m = error_of([&] { g.dispatch(p, {words, y}, rt::push(n, a, bias), rt::Grid{1}); });
  EXPECT_NE(m.find("reads f32 but buffer 'words' holds u32"), std::string::npos) << m;
}

}  // namespace
}  // namespace bdsl::test
