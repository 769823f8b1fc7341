// A fresh, empty directory under the system temp dir, named for this process (so that test runs
// side by side never share one), removed with everything in it when this object dies, whether
// the test passed or not.
#pragma once
#include <filesystem>
#include <string>

namespace bdsl::test {

class TempDir {
 public:
  explicit TempDir(const std::string& what = "test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace bdsl::test
