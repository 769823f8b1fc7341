// glsl_compiler: errors that point at the GLSL, the spirv_intrinsics packed dot product, options.
#include <gtest/gtest.h>

#include <algorithm>

#include "codegen/glsl_compiler.h"
#include "codegen/sha256.h"
#include "test_kernels.h"

namespace bdsl::codegen {
namespace {

constexpr uint32_t kOpSDotKHR = 4450;

bool has_opcode(const std::vector<uint32_t>& spirv, uint32_t opcode) {
  for (size_t i = 5; i < spirv.size(); i += spirv[i] >> 16) {
    if ((spirv[i] & 0xffff) == opcode) return true;
    if ((spirv[i] >> 16) == 0) return false;
  }
  return false;
}

std::string compile_error_of(std::string_view name, std::string_view glsl,
                             const CompileOptions& options = {}) {
  try {
    compile_glsl(name, glsl, options);
  } catch (const CompileError& e) {
    return e.what();
  }
  return "";
}

TEST(Sha256, MatchesKnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(GlslCompiler, CompilesAValidKernelToSpirv) {
  const auto kernel = test_kernels::add_one();
  const auto spirv = compile_glsl(kernel.iface.name, kernel.glsl);
  ASSERT_GT(spirv.size(), 5u);
  EXPECT_EQ(spirv[0], 0x07230203u);
  EXPECT_EQ(spirv[1], 0x00010500u);  // SPIR-V 1.5 for Vulkan 1.2
}

TEST(GlslCompiler, Vulkan13TargetsSpirv16) {
  const auto kernel = test_kernels::add_one();
  const auto spirv = compile_glsl(kernel.iface.name, kernel.glsl, {.vulkan_minor = 3});
  EXPECT_EQ(spirv[1], 0x00010600u);
}

TEST(GlslCompiler, ErrorNamesTheKernelAndShowsTheOffendingLine) {
  const auto kernel = test_kernels::broken();
  const std::string message = compile_error_of(kernel.iface.name, kernel.glsl);
  EXPECT_NE(message.find("broken_kernel"), std::string::npos) << message;
  EXPECT_NE(message.find("undeclared_value"), std::string::npos) << message;
  EXPECT_NE(message.find(">    6 |   data[i] = undeclared_value + 1u;"), std::string::npos)
      << message;
  EXPECT_NE(message.find("     5 |"), std::string::npos) << "context line missing:\n" << message;
}

TEST(GlslCompiler, ExcerptMarksEveryNamedLine) {
  const std::string glsl = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
  const std::string log = "ERROR: 0:2: 'x' : bad\nERROR: 0:9: 'y' : bad\n";
  const std::string excerpt = excerpt_lines(glsl, log, 1);
  EXPECT_NE(excerpt.find(">    2 | b"), std::string::npos) << excerpt;
  EXPECT_NE(excerpt.find(">    9 | i"), std::string::npos) << excerpt;
  EXPECT_NE(excerpt.find("..."), std::string::npos) << excerpt;
  EXPECT_EQ(excerpt.find("| e"), std::string::npos) << excerpt;
}

TEST(GlslCompiler, DefinesReachThePreprocessor) {
  const std::string glsl = R"(#version 450
layout(local_size_x = WG) in;
layout(std430, binding = 0) buffer D { uint d[]; };
void main() { d[gl_GlobalInvocationID.x] = VALUE; }
)";
  EXPECT_NE(compile_error_of("needs_defines", glsl).find("needs_defines"), std::string::npos);
  EXPECT_NO_THROW(compile_glsl("needs_defines", glsl, {.defines = {{"WG", "32"}, {"VALUE", "7u"}}}));
}

TEST(GlslCompiler, PackedSignedDotThroughSpirvIntrinsicsCompiles) {
  const auto kernel = test_kernels::sdot4x8();
  for (bool optimize : {false, true}) {
    const auto spirv = compile_glsl(kernel.iface.name, kernel.glsl, {.optimize = optimize});
    EXPECT_TRUE(has_opcode(spirv, kOpSDotKHR)) << "optimize=" << optimize;
  }
}

// A handoff between workgroups (dsl/control.h's device_barrier, atomic_load, a handoff buffer):
// Vulkan memory model SPIR-V whose handoff loads are NonPrivate, also after spirv-opt. Without
// NonPrivate the loads are private and may be served from before the acquire (run 5 on the H100).
TEST(GlslCompiler, HandoffLoadsAreNonPrivateUnderTheVulkanMemoryModel) {
  using namespace dsl;
  KernelBuilder k("handoff", {64, 1, 1});
  auto counter = k.buffer<u32>("counter", Access::ReadWrite);
  auto data = k.handoff_buffer<f32>("data", Access::ReadWrite);
  auto out = k.buffer<f32>("out", Access::Write);
  auto i = k.global_id().x();
  if_(k.workgroup_id().x() == 0u, [&] {
    data[i] = cast<f32>(i);
    device_barrier();
    if_(k.local_index() == 0u, [&] { atomic_add(counter[0u], 1u); });
  }).else_([&] {
    if_(k.local_index() == 0u, [&] { loop([&] { if_(atomic_load(counter[0u]) != 0u, [] { break_(); }); }); });
    device_barrier();
    out[i] = Expr<f32>(data[i - 64u]) + 1.0f;
  });
  const auto kernel = test_kernels::from_dsl(k.build());
  EXPECT_TRUE(kernel.iface.features.memory_model);
  EXPECT_NE(kernel.glsl.find("#pragma use_vulkan_memory_model"), std::string::npos) << kernel.glsl;
  EXPECT_NE(kernel.glsl.find("nonprivate"), std::string::npos) << kernel.glsl;
  constexpr uint32_t kOpMemoryModel = 14, kOpLoad = 61, kVulkan = 3, kNonPrivatePointer = 0x20;
  for (bool optimize : {false, true}) {
    SCOPED_TRACE(optimize ? "optimized" : "as compiled");
    const auto spirv = compile_glsl(kernel.iface.name, kernel.glsl, {.optimize = optimize});
    bool vulkan_model = false, non_private_float_load = false;
    for (size_t w = 5; w < spirv.size() && (spirv[w] >> 16) != 0; w += spirv[w] >> 16) {
      const uint32_t op = spirv[w] & 0xffff, words = spirv[w] >> 16;
      if (op == kOpMemoryModel) vulkan_model = spirv[w + 2] == kVulkan;
      if (op == kOpLoad && words >= 5 && (spirv[w + 4] & kNonPrivatePointer)) non_private_float_load = true;
    }
    EXPECT_TRUE(vulkan_model);
    EXPECT_TRUE(non_private_float_load);
  }
}

TEST(GlslCompiler, RejectsAnUnknownVulkanVersion) {
  const auto kernel = test_kernels::add_one();
  EXPECT_NE(compile_error_of(kernel.iface.name, kernel.glsl, {.vulkan_minor = 7})
                .find("vulkan_minor"),
            std::string::npos);
}

}  // namespace
}  // namespace bdsl::codegen
