// Device listing and choice, and what the context reports about the device.
#include <gtest/gtest.h>

#include "runtime/device_choice.h"
#include "vulkan_test.h"

namespace bdsl::rt {
namespace {

DeviceInfo fake(uint32_t index, std::string name, DeviceType type, uint32_t minor = 3) {
  DeviceInfo d;
  d.index = index;
  d.name = std::move(name);
  d.type = type;
  d.api_version = VK_MAKE_API_VERSION(0, 1, minor, 0);
  return d;
}

std::string choice_error(const std::vector<DeviceInfo>& devices, std::string_view wish) {
  try {
    choose_device(devices, wish);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

const std::vector<DeviceInfo> kDevices = {fake(0, "llvmpipe (LLVM 15.0.6, 256 bits)", DeviceType::Cpu),
                                          fake(1, "Intel(R) UHD Graphics", DeviceType::Integrated),
                                          fake(2, "NVIDIA H100 80GB HBM3", DeviceType::Discrete)};

TEST(DeviceChoice, DefaultsToTheFastestKind) {
  EXPECT_EQ(choose_device(kDevices, ""), 2u);
  EXPECT_EQ(choose_device({kDevices[0], kDevices[1]}, ""), 1u);
}

TEST(DeviceChoice, ByIndexOrCaseInsensitiveNameSubstring) {
  EXPECT_EQ(choose_device(kDevices, "0"), 0u);
  EXPECT_EQ(choose_device(kDevices, "LLVMPIPE"), 0u);
  EXPECT_EQ(choose_device(kDevices, "h100"), 2u);
}

TEST(DeviceChoice, ClearErrorsListTheAvailableDevices) {
  EXPECT_EQ(choice_error({}, ""), "no Vulkan device found");
  const std::string m = choice_error(kDevices, "radeon");
  EXPECT_NE(m.find("device 'radeon' not found"), std::string::npos) << m;
  EXPECT_NE(m.find("NVIDIA H100"), std::string::npos) << m;
  EXPECT_NE(choice_error(kDevices, "7").find("device '7' not found"), std::string::npos);
}

TEST(DeviceChoice, NeverPicksADeviceBelowVulkan12) {
  const std::vector<DeviceInfo> devices = {fake(0, "old gpu", DeviceType::Discrete, 1),
                                           fake(1, "llvmpipe", DeviceType::Cpu)};
  EXPECT_EQ(choose_device(devices, ""), 1u);
  EXPECT_NE(choice_error(devices, "old").find("not found"), std::string::npos);
}

TEST(DeviceList, ListsAtLeastOneDevice) {
  const auto devices = Context::list_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_FALSE(devices[0].name.empty());
}

using ContextTest = VulkanTest;

TEST_F(ContextTest, ReportsLimitsAndFeatures) {
  const DeviceInfo& info = ctx().info();
  EXPECT_TRUE(info.api_at_least(2));
  EXPECT_GT(info.subgroup_size, 0u);
  EXPECT_GT(info.max_shared_memory, 0u);
  EXPECT_GT(info.max_storage_buffer_range, 0u);
  EXPECT_GE(info.max_push_constants, 128u);
  EXPECT_GT(info.max_workgroup_invocations, 0u);
  const std::string text = info.describe();
  EXPECT_NE(text.find(info.name), std::string::npos);
  EXPECT_NE(text.find("int dot product"), std::string::npos);
  EXPECT_NE(text.find("subgroup: size"), std::string::npos);
  std::cout << text;
}

TEST_F(ContextTest, ValidationLayerIsOnInTestsWhenInstalled) {
  if (!ctx().validation_enabled())
    GTEST_SKIP() << "VK_LAYER_KHRONOS_validation is not installed: these tests ran unchecked";
  EXPECT_EQ(log_->count(), 0u);
}

TEST(ContextChoice, BdslDeviceEnvironmentVariableIsObeyed) {
  const char* old = std::getenv("BDSL_DEVICE");
  const std::string saved = old ? old : "";
  setenv("BDSL_DEVICE", "no-such-device-anywhere", 1);
  try {
    Context ctx({.validation = false, .save_pipeline_cache = false});
    FAIL() << "a missing device was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("device 'no-such-device-anywhere' not found"),
              std::string::npos)
        << e.what();
  }
  old ? setenv("BDSL_DEVICE", saved.c_str(), 1) : unsetenv("BDSL_DEVICE");
}

TEST(ContextChoice, OptionOverridesTheEnvironment) {
  const auto devices = Context::list_devices();
  Context ctx({.device = "0", .validation = false, .save_pipeline_cache = false});
  EXPECT_EQ(ctx.info().index, 0u);
  EXPECT_EQ(ctx.info().name, devices[0].name);
}

}  // namespace
}  // namespace bdsl::rt

namespace bdsl::rt {
namespace {

// The fixture's TearDown trusts the log; prove the log hears the layer (a leaked buffer).
TEST(ValidationLog, CountsWhatTheLayerReports) {
  std::shared_ptr<const ValidationLog> log;
  {
    Context ctx({.validation = true, .save_pipeline_cache = false});
    if (!ctx.validation_enabled()) GTEST_SKIP() << "validation layer not installed";
    log = ctx.validation_log();
    // A buffer with no usage bits: invalid usage the layer reports, and nothing leaks (a leaked
    // object would be reported too, but LeakSanitizer rightly fails the sanitized build on it).
    VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    create.size = 64;
    create.usage = 0;
    VkBuffer buffer = VK_NULL_HANDLE;
    if (vkCreateBuffer(ctx.device(), &create, nullptr, &buffer) == VK_SUCCESS) vkDestroyBuffer(ctx.device(), buffer, nullptr);
  }
  EXPECT_GT(log->errors(), 0u);
  EXPECT_NE(log->summary().find("usage"), std::string::npos) << log->summary();
}

}  // namespace
}  // namespace bdsl::rt
