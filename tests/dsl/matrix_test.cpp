// Cooperative matrices and int8 storage (dsl/matrix.h): the printed GL_NV_cooperative_matrix text,
// the features and multiply-add shapes a kernel reports, the validator's rules, and the tensor-core
// ternary_matmul compiled by glslang to SPIR-V. Host only: no device runs here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

#include "codegen/glsl_compiler.h"
#include "codegen/glsl_printer.h"
#include "codegen/interface_of.h"
#include "codegen/validate.h"
#include "dsl/dsl.h"
#include "ops/ternary/ternary_matmul_coopmat.h"
#include "ops/tuning.h"

using namespace bdsl::dsl;
using bdsl::MatrixShape;
using bdsl::ScalarKind;
using bdsl::codegen::interface_of;
using bdsl::codegen::print_glsl;

namespace {

// One 16x8 tile of C = A * B: A 16x32 row-major, B 32x8 column-major, both int8 in buffers.
Kernel tile_product() {
  KernelBuilder k("tile_product", {32, 1, 1});
  auto a_in = k.buffer<i8>("a_in", Access::Read);
  auto b_in = k.buffer<i8>("b_in", Access::Read);
  auto c_out = k.buffer<i32>("c_out", Access::Write);
  auto acc = k.matrix<MatrixAcc<i32, 16, 8>>("acc", 0);
  auto a = k.matrix<MatrixA<i8, 16, 32>>("a");
  auto b = k.matrix<MatrixB<i8, 32, 8>>("b");
  a.load(a_in, 0u, 32u, MatrixLayout::RowMajor);
  b.load(b_in, 0u, 32u, MatrixLayout::ColumnMajor);
  acc.mul_add(a, b);
  acc.store(c_out, 0u, 8u, MatrixLayout::RowMajor);
  return k.build();
}

bdsl::ops::OpTarget tensor_core_target() {
  bdsl::ops::OpTarget t;
  t.subgroup_size = 32;
  t.max_workgroup_invocations = 1024;
  t.max_shared_bytes = 49152;
  t.int_dot_product = true;
  t.matrix_shapes = {MatrixShape{16, 8, 32, ScalarKind::I8, ScalarKind::I32}};
  return t;
}

}  // namespace

TEST(Matrix, PrintsNvCooperativeMatrixStatements) {
  const std::string glsl = print_glsl(tile_product());
  const char* expected = R"(#version 460
// kernel: tile_product
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_NV_integer_cooperative_matrix : require
layout(local_size_x = 32, local_size_y = 1, local_size_z = 1) in;
layout(std430, set = 0, binding = 0) readonly buffer a_in_block { int8_t a_in[]; };
layout(std430, set = 0, binding = 1) readonly buffer b_in_block { int8_t b_in[]; };
layout(std430, set = 0, binding = 2) writeonly buffer c_out_block { int c_out[]; };
void main() {
  icoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc = icoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0);
  icoopmatNV<8, gl_ScopeSubgroup, 16, 32> a;
  icoopmatNV<8, gl_ScopeSubgroup, 32, 8> b;
  coopMatLoadNV(a, a_in, 0u, 32u, false);
  coopMatLoadNV(b, b_in, 0u, 32u, true);
  acc = coopMatMulAddNV(a, b, acc);
  coopMatStoreNV(acc, c_out, 0u, 8u, false);
}
)";
  EXPECT_EQ(glsl, expected);
}

TEST(Matrix, InterfaceNamesTheFeaturesAndTheShape) {
  const auto iface = interface_of(tile_product());
  EXPECT_TRUE(iface.features.cooperative_matrix_nv);
  EXPECT_TRUE(iface.features.int8);
  EXPECT_TRUE(iface.features.storage8);
  ASSERT_EQ(iface.features.matrix_shapes.size(), 1u);
  EXPECT_EQ(iface.features.matrix_shapes[0], (MatrixShape{16, 8, 32, ScalarKind::I8, ScalarKind::I32}));
  EXPECT_EQ(bdsl::to_string(iface.features.matrix_shapes[0]), "16x8x32 i8*i8+i32");
}

TEST(Matrix, CompilesToSpirv) {
  EXPECT_FALSE(bdsl::codegen::compile_glsl("tile_product", print_glsl(tile_product())).empty());
}

TEST(Matrix, Int8SharedArraysNeedNo8BitStorage) {
  KernelBuilder k("int8_shared", {32, 1, 1});
  auto out = k.buffer<i32>("out", Access::Write);
  auto tile = k.shared<i8>("tile", 32);
  tile[k.local_index()] = cast<i8>(bitcast<i32>(k.local_index()) - 16);
  barrier();
  out[k.local_index()] = cast<i32>(Expr<i8>(tile[31u - k.local_index()]));
  const Kernel kernel = k.build();
  const auto f = interface_of(kernel).features;
  EXPECT_TRUE(f.int8);
  EXPECT_FALSE(f.storage8);
  const std::string glsl = print_glsl(kernel);
  EXPECT_NE(glsl.find("shared int8_t tile[32];"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("int8_t("), std::string::npos) << glsl;
  EXPECT_FALSE(bdsl::codegen::compile_glsl("int8_shared", glsl).empty());
}

// An invocation's own elements: written from bytes of a word, read back after a multiply-add, also
// inside control flow that differs between invocations (they are the invocation's, like a variable).
TEST(Matrix, ElementsAreReadAndWrittenOneAtATime) {
  KernelBuilder k("matrix_elements", {32, 1, 1});
  auto words = k.buffer<u32>("words", Access::Read);
  auto out = k.buffer<i32>("out", Access::Write);
  auto acc = k.matrix<MatrixAcc<i32, 16, 8>>("acc", 0);
  auto a = k.matrix<MatrixA<i8, 16, 32>>("a");
  auto b = k.matrix<MatrixB<i8, 32, 8>>("b");
  auto w = let("w", Expr<u32>(words[k.local_index()]));
  for (uint32_t i = 0; i < 16; ++i) a.set_element(i, cast<i8>(w >> (8 * (i % 4))));
  b.fill(cast<i8>(Expr<i32>(1)));
  auto before = let("before", acc.element(3));
  acc.mul_add(a, b);
  if_(k.local_index() < 16u, [&] { out[k.local_index()] = acc.element(3) - before; });
  const Kernel kernel = k.build();
  bdsl::codegen::validate(kernel);
  const std::string glsl = print_glsl(kernel);
  EXPECT_NE(glsl.find("a[0u] = int8_t(w >> 0u);"), std::string::npos) << glsl;
  EXPECT_NE(glsl.find("a[13u] = int8_t(w >> 8u);"), std::string::npos) << glsl;
  // The read before the multiply-add is taken there, not where it is used.
  EXPECT_NE(glsl.find("const int before = acc[3u];"), std::string::npos) << glsl;
  EXPECT_LT(glsl.find("const int before"), glsl.find("coopMatMulAddNV")) << glsl;
  EXPECT_NE(glsl.find("out_[gl_LocalInvocationIndex] = acc[3u] - before;"), std::string::npos) << glsl;
  EXPECT_FALSE(bdsl::codegen::compile_glsl("matrix_elements", glsl).empty());
}

TEST(Matrix, OperationInDivergentControlFlowIsRefused) {
  KernelBuilder k("divergent_matrix", {32, 1, 1});
  auto c_out = k.buffer<i32>("c_out", Access::Write);
  auto acc = k.matrix<MatrixAcc<i32, 16, 8>>("acc", 0);
  if_(k.local_index() < 16u, [&] { acc.store(c_out, 0u, 8u, MatrixLayout::RowMajor); });
  try {
    bdsl::codegen::validate(k.build());
    FAIL() << "expected a refusal";
  } catch (const DslError& e) {
    EXPECT_NE(std::string(e.what()).find("cooperative-matrix operation on 'acc'"), std::string::npos) << e.what();
  }
}

TEST(Matrix, StoreToReadOnlyBufferIsRefused) {
  KernelBuilder k("matrix_to_input", {32, 1, 1});
  auto c = k.buffer<i32>("c", Access::Read);
  auto acc = k.matrix<MatrixAcc<i32, 16, 8>>("acc", 0);
  acc.store(c, 0u, 8u, MatrixLayout::RowMajor);
  EXPECT_THROW(bdsl::codegen::validate(k.build()), DslError);
}

TEST(TernaryMatmulCoopmat, PrintsTensorCoreLoopAndCompiles) {
  const auto target = tensor_core_target();
  ASSERT_TRUE(bdsl::ops::ternary_matmul_coopmat_shape(target).has_value());
  bdsl::ops::CoopMatmulOptions o;
  o.write_accumulators = true;
  const Kernel k = bdsl::ops::ternary_matmul_coopmat(target, 2560, 2560, o);
  bdsl::codegen::TargetLimits limits;
  limits.max_shared_bytes = target.max_shared_bytes;
  limits.max_invocations = target.max_workgroup_invocations;
  limits.max_size = {1024, 1024, 64};
  bdsl::codegen::validate(k, limits);
  const std::string glsl = print_glsl(k);
  for (const char* line : {"icoopmatNV<32, gl_ScopeSubgroup, 16, 8> acc0 = icoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0);",
                           "acc7 = coopMatMulAddNV(a1, b3, acc7);", "shared uvec4 tile[2112];",
                           "coopMatLoadNV(a0, tile, ", "coopMatStoreNV(acc0, tile, "})
    EXPECT_NE(glsl.find(line), std::string::npos) << line << "\n" << glsl;
  EXPECT_EQ(interface_of(k).features.matrix_shapes, (std::vector<MatrixShape>{{16, 8, 32, ScalarKind::I8, ScalarKind::I32}}));
  EXPECT_FALSE(bdsl::codegen::compile_glsl(k.name(), glsl).empty());
}

TEST(TernaryMatmulCoopmat, DoubleBufferStagesTheNextBlockBesideTheCurrentOne) {
  const auto target = tensor_core_target();
  bdsl::ops::CoopMatmulOptions o;
  o.row_subgroups = 4, o.token_subgroups = 1, o.row_tiles = 2, o.token_tiles = 4;  // 128 x 32: two stages fit
  o.double_buffer = true;
  const Kernel k = bdsl::ops::ternary_matmul_coopmat(target, 2560, 2560, o);
  const std::string glsl = print_glsl(k);
  if (std::getenv("BDSL_PRINT_GLSL")) std::cout << glsl;
  // Stages of (128 + 32) x 9 words, 1440 apart; one barrier in the loop.
  for (const char* line : {"shared uvec4 tile[2880];", "const uint stage = (blk & 1u) * 1440u;", "1440u - stage"})
    EXPECT_NE(glsl.find(line), std::string::npos) << line << "\n" << glsl;
  EXPECT_FALSE(bdsl::codegen::compile_glsl(k.name(), glsl).empty());
  o.row_subgroups = 4, o.token_subgroups = 2, o.row_tiles = 2, o.token_tiles = 4;  // 128 x 64: two stages do not
  EXPECT_THROW(bdsl::ops::ternary_matmul_coopmat(target, 2560, 2560, o), std::invalid_argument);
}

// A 128 x 128 tile's accumulators (128 tokens x 33 words) do not fit in NVIDIA's 48 KiB beside
// nothing else: they leave in two passes of 64 tokens, through the stage's 2,304 words.
TEST(TernaryMatmulCoopmat, AccumulatorsLargerThanSharedMemoryLeaveInPasses) {
  const auto target = tensor_core_target();
  bdsl::ops::CoopMatmulOptions o;
  o.row_subgroups = 4, o.token_subgroups = 2, o.row_tiles = 2, o.token_tiles = 8;
  const Kernel k = bdsl::ops::ternary_matmul_coopmat(target, 2560, 2560, o);
  const std::string glsl = print_glsl(k);
  if (std::getenv("BDSL_PRINT_GLSL")) std::cout << glsl;
  EXPECT_NE(glsl.find("shared uvec4 tile[2304];"), std::string::npos) << glsl;
  // Pass 0 stores tiles 0..3 of each subgroup's 8, pass 1 tiles 4..7.
  for (const char* line : {"coopMatStoreNV(acc3, tile, ", "coopMatStoreNV(acc4, tile, ", "coopMatStoreNV(acc15, tile, "})
    EXPECT_NE(glsl.find(line), std::string::npos) << line;
  EXPECT_LT(glsl.find("coopMatStoreNV(acc3, tile, "), glsl.find("coopMatStoreNV(acc4, tile, "));
  EXPECT_FALSE(bdsl::codegen::compile_glsl(k.name(), glsl).empty());
  o.token_tiles = 4;  // 128 x 64: one pass, as before
  EXPECT_NE(print_glsl(bdsl::ops::ternary_matmul_coopmat(target, 2560, 2560, o)).find("shared uvec4 tile[2112];"),
            std::string::npos);
}

// Each projection class takes the tuning table's tile (16x8x32: 16 rows, 8 tokens a tile), and
// the bench's override replaces the table until it is reset.
TEST(TernaryMatmulCoopmat, AutoTakesTheTuningTablesTileForEachProjectionClass) {
  const auto target = tensor_core_target();
  auto check = [&](uint32_t rows, uint32_t cols, const bdsl::ops::CoopTile& t) {
    const auto m = bdsl::ops::ternary_matmul_auto(target, rows, cols);
    EXPECT_EQ(m.row_groups, rows / (t.row_subgroups * t.row_tiles * 16)) << rows << "x" << cols;
    EXPECT_EQ(m.tokens_per_group, t.token_subgroups * t.token_tiles * 8) << rows << "x" << cols;
  };
  bdsl::ops::Tuning tuning = bdsl::ops::tuning_for(target);
  check(2560, 2560, tuning.coop_tile_short);
  check(6912, 2560, tuning.coop_tile_tall);
  check(2560, 6912, tuning.coop_tile_deep);
  tuning.coop_tile_short = {4, 2, 2, 4, false};  // 128 x 64
  {
    const bdsl::ops::ScopedTuning scoped(tuning);
    EXPECT_EQ(bdsl::ops::ternary_matmul_auto(target, 2560, 2560).row_groups, 20u);
  }
  check(2560, 2560, bdsl::ops::tuning_for(target).coop_tile_short);
}

TEST(TernaryMatmulCoopmat, AutoPicksTensorCoresOnlyWhereListed) {
  auto target = tensor_core_target();
  EXPECT_TRUE(bdsl::ops::ternary_matmul_auto(target, 64, 256).cooperative);
  target.matrix_shapes.clear();
  const auto plain = bdsl::ops::ternary_matmul_auto(target, 64, 256);
  EXPECT_FALSE(plain.cooperative);
  EXPECT_EQ(plain.kernel.name().rfind("ternary_matmul_", 0), 0u);
  EXPECT_THROW(bdsl::ops::ternary_matmul_coopmat(target, 64, 256), std::invalid_argument);
}
