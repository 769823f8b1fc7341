// The GLSL printer: readable, deterministic, each shared value computed once, value semantics kept.
#include <gtest/gtest.h>

#include "codegen/glsl_printer.h"
#include "dsl/dsl.h"
#include "ops/examples/saxpy.h"

using namespace bdsl::dsl;
using bdsl::codegen::print_glsl;

namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t c = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++c;
  return c;
}

}  // namespace

TEST(Printer, SaxpyReadsLikeItsMaths) {
  const std::string glsl = print_glsl(bdsl::ops::saxpy());
  EXPECT_NE(glsl.find("layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;"), std::string::npos);
  EXPECT_NE(glsl.find("readonly buffer x_block { float x[]; };"), std::string::npos);
  EXPECT_NE(glsl.find("y[gl_GlobalInvocationID.x] = (pc.a * x[gl_GlobalInvocationID.x]) + y[gl_GlobalInvocationID.x];"),
            std::string::npos);
}

TEST(Printer, SameKernelSameText) { EXPECT_EQ(print_glsl(bdsl::ops::saxpy()), print_glsl(bdsl::ops::saxpy())); }

TEST(Printer, ValueUsedTwiceIsComputedOnce) {
  KernelBuilder k("square_sum");
  auto x = k.buffer<f32>("x", Access::Read);
  auto y = k.buffer<f32>("y", Access::Write);
  auto i = k.global_id().x();
  auto s = x[i] * 2.0f + 1.0f;
  y[i] = s * s;
  const std::string glsl = print_glsl(k.build());
  EXPECT_EQ(count(glsl, "* 2.0"), 1u);
  EXPECT_NE(glsl.find("y[gl_GlobalInvocationID.x] = t0 * t0;"), std::string::npos);
}

TEST(Printer, EqualExpressionsBuiltTwiceAreShared) {
  KernelBuilder k("shared_cse");
  auto x = k.buffer<f32>("x", Access::Read);
  auto y = k.buffer<f32>("y", Access::Write);
  auto i = k.global_id().x();
  y[i] = exp(x[i] * 3.0f);
  y[i + 1u] = exp(x[i] * 3.0f);
  const std::string glsl = print_glsl(k.build());
  EXPECT_EQ(count(glsl, "exp("), 1u) << glsl;
}

TEST(Printer, ReadBeforeAWriteKeepsTheOldValue) {
  KernelBuilder k("swap");
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto a = y[0u] + 0.0f;  // read before the stores below
  auto b = y[1u] + 0.0f;
  y[0u] = b;
  y[1u] = a;
  const std::string glsl = print_glsl(k.build());
  // The read of y[0] is named before y[0] is overwritten; y[1] is read in the same statement.
  const auto first_store = glsl.find("y[0u] =");
  ASSERT_NE(first_store, std::string::npos);
  EXPECT_LT(glsl.find("const float t0 = y[0u] + 0.0;"), first_store);
  EXPECT_NE(glsl.find("y[1u] = t0;"), std::string::npos);
}

TEST(Printer, VarReadKeepsItsValueAfterAssignment) {
  KernelBuilder k("var_value");
  auto y = k.buffer<u32>("y", Access::Write);
  auto v = k.var<u32>("v", 1u);
  Expr<u32> old = v;
  v = 5u;
  y[0u] = old + v;
  const std::string glsl = print_glsl(k.build());
  EXPECT_NE(glsl.find("const uint t0 = v;"), std::string::npos);
  EXPECT_NE(glsl.find("y[0u] = t0 + v;"), std::string::npos);
}

TEST(Printer, LoopInvariantValueIsHoisted) {
  KernelBuilder k("hoist");
  auto x = k.buffer<f32>("x", Access::Read);
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto n = k.push<u32>("n");
  auto scale = sqrt(x[0u]);
  for_range(0u, n, [&](Expr<u32> j) { y[j] = y[j] * scale; }, "j");
  const std::string glsl = print_glsl(k.build());
  EXPECT_LT(glsl.find("sqrt("), glsl.find("for ("));
}

TEST(Printer, ValueUsedOutsideItsBlockIsAnError) {
  KernelBuilder k("leak");
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  Expr<f32> leaked = 0.0f;
  if_(y[0u] > 0.0f, [&] { leaked = y[1u] * 2.0f; });
  y[2u] = leaked;
  try {
    print_glsl(k.build());
    FAIL() << "expected an error";
  } catch (const DslError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel 'leak'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside the block"), std::string::npos) << e.what();
  }
}

TEST(Printer, GlslKeywordsAsNamesAreRenamed) {
  KernelBuilder k("keywords");
  auto in = k.buffer<f32>("input", Access::Read);
  auto out = k.buffer<f32>("out", Access::Write);
  auto shared = k.push<f32>("shared");
  out[0u] = in[0u] * shared;
  const std::string glsl = print_glsl(k.build());
  EXPECT_NE(glsl.find("out_[0u] = input_[0u] * pc.shared_;"), std::string::npos) << glsl;
}

TEST(Printer, LoopBoundsMayBothBeLiterals) {
  KernelBuilder k("literal_loop");
  auto y = k.buffer<u32>("y", Access::Write);
  for_range(0u, 4u, [&](Expr<u32> j) { y[j] = j; }, "j");
  for_range(0, 8, 2, [&](Expr<i32> j) { y[cast<u32>(j)] = 1u; }, "k");
  const std::string glsl = print_glsl(k.build());
  EXPECT_NE(glsl.find("for (uint j = 0u; j < 4u; j += 1u)"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("for (int k = 0; k < 8; k += 2)"), std::string::npos) << glsl;
}

TEST(Printer, SixtyFourBitLiteralsAndTypesAreSpelled) {
  KernelBuilder k("wide_literals");
  auto wide = k.buffer<u64>("wide", Access::Write);
  auto signed_out = k.buffer<i64>("signed_out", Access::Write);
  wide[0u] = constant<u64>(UINT64_MAX);
  signed_out[0u] = constant<i64>(INT64_MIN) + constant<i64>(-7);
  const std::string glsl = print_glsl(k.build());
  EXPECT_NE(glsl.find("#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("buffer wide_block { uint64_t wide[]; };"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("18446744073709551615ul"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("(-9223372036854775807l - 1l)"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("-7l"), std::string::npos) << glsl;
}

TEST(Printer, TwoDimensionalSharedArrayIsRowMajor) {
  KernelBuilder k("tile", {16, 16, 1});
  auto out = k.buffer<f32>("out", Access::Write);
  auto tile = k.shared<f32>("tile", 4, 5);
  tile[k.local_id().y()][k.local_id().x()] = 1.0f;
  barrier();
  out[0u] = tile[3u][4u];
  const std::string glsl = print_glsl(k.build());
  EXPECT_NE(glsl.find("shared float tile[20];"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("tile[(gl_LocalInvocationID.y * 5u) + gl_LocalInvocationID.x]"), std::string::npos) << glsl;
  // A constant index past its dimension is refused, naming it.
  KernelBuilder bad("tile_out_of_range");
  auto t = bad.shared<u32>("t", 2, 3);
  try {
    t[1u][3u] = 0u;
    FAIL() << "a column past the end was accepted";
  } catch (const DslError& e) {
    EXPECT_NE(std::string(e.what()).find("column 3 is outside 0..2"), std::string::npos) << e.what();
  }
}
