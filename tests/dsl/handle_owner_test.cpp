// A handle (buffer, shared array, variable, matrix) or expression belongs to the builder that made
// it. Used in another kernel's builder, nested or later, or after build(), it is refused at once
// with a DslError naming both kernels: never a silent write to another kernel's binding, never a
// fault on a node of a builder that is gone.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dsl/dsl.h"

namespace bdsl::dsl {
namespace {

// The DslError's message ("" if none was thrown, "other" for another exception).
std::string dsl_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const DslError& e) {
    return e.what();
  } catch (...) {
    return "other";
  }
  return "";
}

void expect_names(const std::string& message, const std::string& here, const std::string& owner, const std::string& what) {
  EXPECT_NE(message.find("kernel '" + here + "'"), std::string::npos) << message;
  EXPECT_NE(message.find("of kernel '" + owner + "'"), std::string::npos) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
}

TEST(HandleOwner, ABufferOfABuiltKernelIsRefusedInTheNext) {
  std::optional<Buffer<u32>> first_out;
  {
    KernelBuilder first("first");
    first_out = first.buffer<u32>("out", Access::Write);
    (*first_out)[first.global_id().x()] = 1u;
    first.build();
  }
  KernelBuilder second("second");
  auto in = second.buffer<u32>("in", Access::Read);  // binding 0, as first's `out` was
  const std::string m = dsl_error([&] { (*first_out)[0u] = in[0u]; });
  expect_names(m, "second", "first", "buffer binding 0");
  EXPECT_EQ(dsl_error([&] { (void)first_out->binding(); }), m);
}

TEST(HandleOwner, EveryKindOfHandleIsRefusedInANestedBuilder) {
  KernelBuilder outer("outer");
  auto buffer = outer.buffer<f32>("data", Access::ReadWrite);
  auto shared = outer.shared<f32>("tile", 64);
  auto var = outer.var<f32>("acc", 0.0f);
  auto push = outer.push<u32>("n");
  auto acc = outer.matrix<MatrixAcc<f32, 16, 16>>("acc_tile", 0.0f);
  {
    KernelBuilder inner("inner");
    auto own = inner.buffer<f32>("own", Access::ReadWrite);
    expect_names(dsl_error([&] { own[0u] = buffer[0u]; }), "inner", "outer", "buffer binding 0");
    expect_names(dsl_error([&] { shared[0u] = 1.0f; }), "inner", "outer", "shared array 0");
    expect_names(dsl_error([&] { var = 2.0f; }), "inner", "outer", "variable 0");
    expect_names(dsl_error([&] { own[0u] = Expr<f32>(var); }), "inner", "outer", "variable 0");
    expect_names(dsl_error([&] { own[0u] = cast<f32>(push); }), "inner", "outer", "an expression");
    expect_names(dsl_error([&] { acc.fill(1.0f); }), "inner", "outer", "matrix 0");
  }
  // The outer builder goes on once the inner one is gone.
  buffer[outer.global_id().x()] = shared[0u] + var + cast<f32>(push);
  EXPECT_NO_THROW(outer.build());
}

TEST(HandleOwner, UseAfterBuildIsRefused) {
  KernelBuilder k("built");
  auto out = k.buffer<u32>("out", Access::Write);
  auto i = k.global_id().x();
  out[i] = 1u;
  k.build();
  const std::string m = dsl_error([&] { out[i] = 2u; });
  EXPECT_NE(m.find("kernel 'built'"), std::string::npos) << m;
  EXPECT_NE(m.find("after build()"), std::string::npos) << m;
  EXPECT_NE(dsl_error([&] { (void)(i + 1u); }).find("after build()"), std::string::npos);
}

// An expression whose builder is gone (never built: its nodes are freed) is refused by its owner
// alone, before its node is read.
TEST(HandleOwner, AnExpressionOfAGoneBuilderIsRefusedWithoutTouchingIt) {
  std::optional<Expr<u32>> stale;
  {
    KernelBuilder gone("gone");
    stale = gone.global_id().x() * 3u;
  }
  KernelBuilder k("alive");
  auto out = k.buffer<u32>("out", Access::Write);
  expect_names(dsl_error([&] { out[0u] = *stale; }), "alive", "gone", "an expression");
}

}  // namespace
}  // namespace bdsl::dsl
