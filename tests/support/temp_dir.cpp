#include "temp_dir.h"

#include <unistd.h>

#include <atomic>
#include <system_error>

namespace bdsl::test {

TempDir::TempDir(const std::string& what) {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("bdsl-" + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace bdsl::test
