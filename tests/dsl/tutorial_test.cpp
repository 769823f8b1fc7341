// docs/writing-kernels.md cannot rot: every C++ block in it must appear in the ops/ sources that
// the device tests run, and every GLSL block must be exactly what the printer prints today.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "codegen/glsl_compiler.h"
#include "codegen/glsl_printer.h"
#include "codegen/validate.h"
#include "ops/examples/saxpy.h"
#include "ops/examples/subgroup_softmax.h"
#include "ops/examples/workgroup_sum.h"

namespace {

std::string read(const std::string& relative) {
  std::ifstream in(std::string(BDSL_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in) << "cannot open " << relative;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string squeeze(const std::string& s) {  // whitespace-insensitive comparison
  std::string out;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) out += c;
  return out;
}

struct CodeBlock {
  std::string language, label, text;
};

// Fenced blocks; a line `<!-- glsl: NAME -->` right before a block labels it.
std::vector<CodeBlock> blocks(const std::string& md) {
  std::vector<CodeBlock> out;
  std::istringstream in(md);
  std::string line, label;
  while (std::getline(in, line)) {
    if (line.rfind("<!-- glsl: ", 0) == 0) label = line.substr(11, line.find(" -->") - 11);
    if (line.rfind("```", 0) != 0 || line.size() == 3) continue;
    CodeBlock b{line.substr(3), label, ""};
    label.clear();
    while (std::getline(in, line) && line.rfind("```", 0) != 0) b.text += line + "\n";
    out.push_back(b);
  }
  return out;
}

}  // namespace

TEST(Tutorial, CppBlocksAreTheCodeTheTestsRun) {
  const std::string sources =
      squeeze(read("ops/examples/saxpy.cpp") + read("ops/examples/workgroup_sum.cpp") + read("ops/examples/subgroup_softmax.cpp") +
              read("tools/cmd_demo.cpp") + read("examples/host_program.cpp"));
  int checked = 0;
  for (const auto& b : blocks(read("docs/writing-kernels.md"))) {
    if (b.language != "cpp") continue;
    EXPECT_NE(sources.find(squeeze(b.text)), std::string::npos) << "not in ops/: \n" << b.text;
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

TEST(Tutorial, GlslBlocksAreWhatThePrinterPrints) {
  const std::map<std::string, bdsl::dsl::Kernel> kernels = {
      {"saxpy", bdsl::ops::saxpy()},
      {"workgroup_sum(128)", bdsl::ops::workgroup_sum(128)},
      {"subgroup_softmax(64)", bdsl::ops::subgroup_softmax(64)}};
  int checked = 0;
  for (const auto& b : blocks(read("docs/writing-kernels.md"))) {
    if (b.language != "glsl") continue;
    ASSERT_TRUE(kernels.count(b.label)) << "GLSL block without a known label: '" << b.label << "'";
    EXPECT_EQ(b.text, bdsl::codegen::print_glsl(kernels.at(b.label))) << b.label;
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

#include "ops/catalog.h"
#include "ops/tuning.h"

// `bitnet-dsl shaders` prints any op of the catalog: each must build and print for a small device
// (lavapipe's limits) and for a large one (an H100's), and names must be unique.
namespace {
bdsl::ops::OpTarget large_device() {
  bdsl::ops::OpTarget large;
  large.subgroup_size = 32;
  large.max_workgroup_invocations = 1024;
  large.max_shared_bytes = 49152;
  large.max_storage_buffer_range = 4095ull << 20;
  large.int_dot_product = true;
  return large;
}
}  // namespace

TEST(Catalog, EveryOpPrintsForSmallAndLargeDevices) {
  bdsl::ops::OpTarget small;
  small.subgroup_size = 8;
  small.max_shared_bytes = 32768;
  small.max_storage_buffer_range = 128ull << 20;
  bdsl::ops::OpTarget large = large_device();
  std::set<std::string> names;
  for (const auto& e : bdsl::ops::catalog()) {
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate op name " << e.name;
    for (const auto* t : {&small, &large}) {
      const std::string glsl = bdsl::codegen::print_glsl(e.build(*t));
      EXPECT_NE(glsl.find("void main()"), std::string::npos) << e.name;
    }
  }
  EXPECT_GE(names.size(), 20u);
}

// Every op passes the structural checks (each barrier in uniform control flow, the limits) and
// compiles to valid SPIR-V for a large device: the tensor-core kernels too, which a CPU device
// never builds otherwise.
TEST(Catalog, EveryOpValidatesAndCompilesForALargeDevice) {
  const bdsl::ops::OpTarget large = large_device();
  const bdsl::codegen::TargetLimits limits{.max_shared_bytes = large.max_shared_bytes,
                                           .max_invocations = large.max_workgroup_invocations,
                                           .max_size = {1024, 1024, 64},
                                           .max_push_bytes = 128};
  auto check = [&](const bdsl::ops::CatalogEntry& e, const std::string& variant) {
    const bdsl::dsl::Kernel kernel = e.build(large);
    EXPECT_NO_THROW(bdsl::codegen::validate(kernel, limits)) << e.name << variant;
    EXPECT_NO_THROW(bdsl::codegen::compile_glsl(e.name, bdsl::codegen::print_glsl(kernel), {.vulkan_minor = 3, .optimize = false}))
        << e.name << variant;
  };
  for (const auto& e : bdsl::ops::catalog()) check(e, "");
  // And the variants the tuning table switches, the other way than the table's.
  bdsl::ops::Tuning t = bdsl::ops::tuning_for(large);
  t.prefill_coopmat_attention_lean_weights = !t.prefill_coopmat_attention_lean_weights;
  t.prefill_coopmat_attention_subgroups_per_head = 3 - t.prefill_coopmat_attention_subgroups_per_head;
  const bdsl::ops::ScopedTuning switched(t);
  for (const auto& e : bdsl::ops::catalog())
    if (e.name == "attention_prefill_coopmat") check(e, " with the lean weights and the subgroups per head switched");
}
