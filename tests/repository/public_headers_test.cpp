// Each ops/ family exports one public header (ops/common.h, ops/ternary.h, ...); the files in the
// family's folder are its implementation. Code outside ops/ includes only those headers and the
// few that belong to no family (target, tuning, plan, pipeline_batch, catalog), so that what a family keeps
// internal can change without touching models/, serve/, tools/, bench/ or golden/. Tests may
// reach inside a family to test its parts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

TEST(Repository, CodeOutsideOpsIncludesOnlyPublicOpsHeaders) {
  const fs::path root = BDSL_SOURCE_DIR;
  const std::set<std::string> allowed = {"ops/common.h", "ops/ternary.h",      "ops/attention.h", "ops/head.h",
                                         "ops/examples.h", "ops/experimental.h", "ops/target.h",    "ops/tuning.h",
                                         "ops/plan.h",     "ops/pipeline_batch.h", "ops/catalog.h"};
  for (const auto& header : allowed) EXPECT_TRUE(fs::exists(root / header)) << header;
  const std::regex include(R"(^\s*#\s*include\s*"(ops/[^"]+)\")");
  size_t includes = 0;
  for (const char* top : {"models", "serve", "tools", "bench", "golden"})
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      const auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
      std::ifstream in(e.path());
      std::string line;
      std::smatch m;
      for (int n = 1; std::getline(in, line); ++n)
        if (std::regex_search(line, m, include)) {
          ++includes;
          EXPECT_TRUE(allowed.count(m[1])) << fs::relative(e.path(), root).string() << ":" << n << " includes " << m[1]
                                           << ", inside an ops/ family: include the family's header";
        }
    }
  EXPECT_GT(includes, 20u) << "the pattern finds the includes";
}

// A family header exports its own folder's files, no other family's.
TEST(Repository, FamilyHeadersIncludeTheirOwnFolder) {
  const fs::path root = BDSL_SOURCE_DIR;
  const std::regex include(R"(^#include "ops/([a-z]+)/[\w.]+\.h\"$)");
  for (const char* family : {"common", "ternary", "attention", "head", "examples", "experimental"}) {
    std::ifstream in(root / "ops" / (std::string(family) + ".h"));
    ASSERT_TRUE(in) << family;
    std::string line;
    std::smatch m;
    size_t own = 0;
    while (std::getline(in, line))
      if (std::regex_match(line, m, include)) {
        EXPECT_EQ(m[1], family) << "ops/" << family << ".h includes " << line;
        ++own;
      }
    EXPECT_GT(own, 0u) << "ops/" << family << ".h exports nothing";
  }
}

}  // namespace
