#include "device_test.h"

namespace bdsl::test {

void DeviceTest::SetUp() {
  rt::ContextOptions options;
  options.validation = true;
  options.save_pipeline_cache = false;
  ctx_ = std::make_unique<rt::Context>(options);
  log_ = ctx_->validation_log();
}

void DeviceTest::TearDown() {
  ctx_.reset();  // leaks are reported when the device is destroyed
  EXPECT_EQ(log_->count(), 0u) << log_->summary();
}

}  // namespace bdsl::test
