// Comments and documents cite repository paths ("see ops/head/top_k.h"); a citation that names a
// file no longer there misleads the reader. Every path of the repository's top-level folders
// cited in a source, build or document file must exist.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

bool scanned(const fs::path& p) {
  const auto ext = p.extension().string();
  return ext == ".h" || ext == ".cpp" || ext == ".md" || ext == ".txt" || ext == ".cmake" || ext == ".sh" ||
         p.filename() == "run";
}

TEST(Repository, EveryCitedPathExists) {
  const fs::path root = BDSL_SOURCE_DIR;
  const std::regex cited(
      R"((?:^|[^\w./-])((?:dsl|codegen|runtime|ops|models|golden|tests|bench|tools|docs|scripts|cmake)/[\w./-]*\w\.(?:h|cpp|md|txt|sh|json|cmake|in)))");
  std::vector<fs::path> files = {root / "README.md", root / "CMakeLists.txt", root / ".ci/run"};
  for (const char* top : {"dsl", "codegen", "runtime", "ops", "models", "golden", "tests", "bench", "tools", "docs", "scripts", "cmake"})
    for (const auto& e : fs::recursive_directory_iterator(root / top))
      if (e.is_regular_file() && scanned(e.path()) && e.path().string().find("/golden/data/") == std::string::npos)
        files.push_back(e.path());
  size_t citations = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      for (std::sregex_iterator m(line.begin(), line.end(), cited), end; m != end; ++m) {
        ++citations;
        const std::string path = (*m)[1];
        EXPECT_TRUE(fs::exists(root / path)) << fs::relative(f, root).string() << ":" << n << " cites " << path;
      }
  }
  EXPECT_GT(citations, 100u) << "the pattern finds the repository's citations";
}

}  // namespace
