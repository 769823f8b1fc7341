#include "device_test.h"

#include <cstdlib>
#include <string>

namespace bdsl::test {

void DeviceTest::SetUp() {
  rt::ContextOptions options;
  options.validation = true;
  options.save_pipeline_cache = false;
  ctx_ = std::make_unique<rt::Context>(options);
  log_ = ctx_->validation_log();
}

bool DeviceTest::workgroups_start_in_order() const {
  if (ctx_->info().type != rt::DeviceType::Cpu) return true;
  const char* threads = std::getenv("LP_NUM_THREADS");
  return threads && std::string(threads) == "0";
}

void DeviceTest::TearDown() {
  ctx_.reset();  // leaks are reported when the device is destroyed
  EXPECT_EQ(log_->count(), 0u) << log_->summary();
}

}  // namespace bdsl::test
