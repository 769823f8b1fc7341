#include "vulkan_test.h"

namespace bdsl::rt {

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
