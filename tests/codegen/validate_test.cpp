// Structural errors are caught before any GLSL is compiled, with the kernel and problem named.
#include <gtest/gtest.h>

#include "codegen/validate.h"
#include "dsl/dsl.h"

using namespace bdsl::dsl;
using bdsl::codegen::TargetLimits;
using bdsl::codegen::validate;

namespace {

void expect_error(const Kernel& k, const std::string& fragment, const TargetLimits& limits = {}) {
  try {
    validate(k, limits);
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const DslError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kernel '" + k.name() + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

}  // namespace

TEST(Validate, WriteToReadOnlyBufferIsRefused) {
  KernelBuilder k("writes_input");
  auto x = k.buffer<f32>("x", Access::Read);
  x[0u] = 1.0f;
  expect_error(k.build(), "writes buffer 'x', which is declared read-only");
}

TEST(Validate, ReadOfWriteOnlyBufferIsRefused) {
  KernelBuilder k("reads_output");
  auto y = k.buffer<f32>("y", Access::Write);
  y[0u] = y[1u] + 1.0f;
  expect_error(k.build(), "reads buffer 'y', which is declared write-only");
}

TEST(Validate, AtomicOnReadOnlyBufferIsRefused) {
  KernelBuilder k("atomic_input");
  auto c = k.buffer<u32>("counter", Access::Read);
  atomic_add(c[0u], 1u);
  expect_error(k.build(), "atomic update of buffer 'counter'");
}

TEST(Validate, BarrierInDivergentIfIsRefused) {
  KernelBuilder k("divergent_barrier");
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  if_(k.local_id().x() < 16u, [&] {
    y[0u] = 1.0f;
    barrier();
  });
  expect_error(k.build(), "barrier() inside control flow that differs");
}

TEST(Validate, BarrierAfterDivergentBreakIsRefused) {
  KernelBuilder k("divergent_loop");
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto n = k.push<u32>("n");
  for_range(0u, n, [&](Expr<u32> i) {
    if_(y[i] > 0.0f, [&] { break_(); });
    barrier();
  });
  expect_error(k.build(), "barrier() inside control flow");
}

TEST(Validate, BarrierAfterVarMadeDivergentIsRefused) {
  KernelBuilder k("divergent_var");
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto limit = k.var<u32>("limit", 4u);
  limit = k.local_index();  // now differs per invocation
  if_(limit > 2u, [&] { barrier(); });
  y[0u] = 0.0f;
  expect_error(k.build(), "barrier() inside control flow");
}

TEST(Validate, BarrierInUniformLoopIsAccepted) {
  KernelBuilder k("uniform_loop", {64, 1, 1});
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto n = k.push<u32>("n");
  auto s = k.shared<f32>("partial", 64);
  for_range(0u, n, [&](Expr<u32> i) {
    s[k.local_index()] = y[i];
    barrier();
    if_(k.workgroup_id().x() == 0u, [&] { barrier(); });
  });
  EXPECT_NO_THROW(validate(k.build()));
}

// A value read from shared memory differs between invocations as far as the check knows; one
// broadcast from invocation 0 does not, so a loop bounded by it may hold barriers.
TEST(Validate, BarrierUnderABroadcastValueIsAcceptedAndUnderASharedLoadIsNot) {
  auto build = [](bool broadcast) {
    KernelBuilder k(broadcast ? "broadcast_bound" : "shared_bound", {64, 1, 1});
    auto y = k.buffer<u32>("y", Access::ReadWrite);
    auto s = k.shared<u32>("count", 1);
    if_(k.local_index() == 0u, [&] { s[0u] = atomic_add(y[0u], 1u); });
    barrier();
    Expr<u32> n = broadcast ? k.broadcast("n", Expr<u32>(s[0u])) : let("n", Expr<u32>(s[0u]));
    for_range(0u, n, [&](Expr<u32> i) {
      y[i + 1u] = i;
      barrier();
    });
    return k.build();
  };
  EXPECT_NO_THROW(validate(build(true)));
  expect_error(build(false), "barrier() inside control flow");
}

TEST(Validate, SharedArrayTooBigForTheDeviceIsRefused) {
  KernelBuilder k("big_shared", {64, 1, 1});
  auto s = k.shared<f32>("tile", 8192);  // 32 KiB
  s[k.local_index()] = 0.0f;
  TargetLimits small;
  small.max_shared_bytes = 16384;
  expect_error(k.build(), "shared memory of 32768 bytes exceeds the device limit 16384", small);
}

TEST(Validate, WorkgroupTooLargeIsRefused) {
  KernelBuilder k("huge_group", {1024, 1, 1});
  TargetLimits small;
  small.max_size = {256, 256, 64};
  small.max_invocations = 256;
  expect_error(k.build(), "exceeds the device limit 256", small);
}

TEST(Builder, BreakOutsideLoopIsRefused) {
  KernelBuilder k("stray_break");
  EXPECT_THROW(break_(), DslError);
}

TEST(Builder, InvalidNamesAreRefused) {
  KernelBuilder k("names");
  EXPECT_THROW(k.buffer<f32>("gl_x", Access::Write), DslError);
  EXPECT_THROW(k.buffer<f32>("a__b", Access::Write), DslError);
  EXPECT_THROW(k.buffer<f32>("", Access::Write), DslError);
  EXPECT_THROW(k.buffer<f32>("2x", Access::Write), DslError);
}

TEST(Builder, ExpressionOutsideAKernelIsAnError) {
  EXPECT_THROW(constant<f32>(1.0f), DslError);
}
