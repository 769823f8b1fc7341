#include "vulkan_test.h"

#include <atomic>
#include <unistd.h>

namespace bdsl::rt {

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("bdsl-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void VulkanTest::SetUp() {
  ContextOptions options;
  options.validation = true;
  options.pipeline_cache_dir = cache_dir_.path();
  ctx_ = std::make_unique<Context>(options);
  log_ = ctx_->validation_log();
}

void VulkanTest::TearDown() {
  ctx_.reset();
  if (log_) {  // null when SetUp threw
    EXPECT_EQ(log_->count(), 0u) << log_->summary();
  }
}

Pipeline VulkanTest::pipeline(const test_kernels::TestKernel& kernel) {
  return Pipeline(*ctx_, shaders_.get(kernel.iface, kernel.glsl));
}

}  // namespace bdsl::rt
