// Pipelines: built from compiled kernels; malformed or unrunnable interfaces refused by name.
#include <gtest/gtest.h>

#include <fstream>

#include "runtime/pipeline.h"
#include "runtime/pipeline_cache.h"
#include "vulkan_test.h"

namespace bdsl::rt {
namespace {

using PipelineTest = VulkanTest;

TEST_F(PipelineTest, BuildsFromACompiledKernel) {
  Pipeline p = pipeline(test_kernels::scale());
  EXPECT_NE(p.handle(), VK_NULL_HANDLE);
  EXPECT_EQ(p.name(), "scale");
  EXPECT_EQ(p.iface().bindings.size(), 2u);
}

TEST_F(PipelineTest, RefusesAWorkgroupLargerThanTheDevice) {
  auto k = test_kernels::add_one();
  k.iface.workgroup_size = {ctx().info().max_workgroup_size[0] + 1, 1, 1};
  const std::string m = error_of([&] { pipeline(k); });
  EXPECT_NE(m.find("kernel 'add_one'"), std::string::npos) << m;
  EXPECT_NE(m.find("workgroup size x"), std::string::npos) << m;
}

TEST_F(PipelineTest, RefusesTooMuchSharedMemoryAndPushConstants) {
  auto k = test_kernels::add_one();
  k.iface.shared_bytes = ctx().info().max_shared_memory + 4;
  EXPECT_NE(error_of([&] { pipeline(k); }).find("shared memory"), std::string::npos);
  k = test_kernels::add_one();
  k.iface.push_bytes = ctx().info().max_push_constants + 4;
  const std::string m = error_of([&] { pipeline(k); });
  EXPECT_NE(m.find("push constant block"), std::string::npos) << m;
}

TEST_F(PipelineTest, RefusesAMalformedInterface) {
  auto k = test_kernels::scale();
  k.iface.bindings[1].binding = 0;
  EXPECT_NE(error_of([&] { pipeline(k); }).find("declared twice"), std::string::npos);
  k = test_kernels::scale();
  k.iface.push_fields[1].offset = 8;  // past the 8-byte block
  const std::string m = error_of([&] { pipeline(k); });
  EXPECT_NE(m.find("'factor'"), std::string::npos) << m;
  k = test_kernels::scale();
  k.iface.workgroup_size = {64, 0, 1};
  EXPECT_NE(error_of([&] { pipeline(k); }).find("kernel 'scale'"), std::string::npos);
}

TEST_F(PipelineTest, AMissingFeatureNamesDeviceFeatureAndKernel) {
  DeviceInfo device = ctx().info();
  device.int_dot_product = false;
  const std::string m =
      error_of([&] { check_device_can_run(device, test_kernels::sdot4x8().iface); });
  EXPECT_NE(m.find("device " + device.name + " lacks int_dot_product"), std::string::npos) << m;
  EXPECT_NE(m.find("needed by kernel 'sdot4x8'"), std::string::npos) << m;
}

// Each subgroup feature a kernel uses is named where the device lacks it, before any compile.
TEST_F(PipelineTest, AMissingSubgroupFeatureIsNamed) {
  using namespace dsl;
  KernelBuilder k("relative_shuffle", {64, 1, 1});
  auto out = k.buffer<u32>("out", Access::Write);
  auto lane = k.subgroup_invocation();
  out[k.global_id().x()] = subgroup_shuffle_down(lane, 1u) + subgroup_inclusive_add(lane) +
                           subgroup_ballot_bit_count(subgroup_ballot(lane < 3u));
  const auto kernel = test_kernels::from_dsl(k.build());
  DeviceInfo device = ctx().info();
  device.subgroup_operations = VK_SUBGROUP_FEATURE_BASIC_BIT;
  const std::string m = error_of([&] { check_device_can_run(device, kernel.iface); });
  for (const char* feature : {"subgroup_shuffle_relative", "subgroup_arithmetic", "subgroup_ballot"})
    EXPECT_NE(m.find(feature), std::string::npos) << feature << ": " << m;
  EXPECT_NE(m.find("needed by kernel 'relative_shuffle'"), std::string::npos) << m;
}

// 64-bit integers and float atomics: named where the device lacks them, buffer and shared apart.
TEST_F(PipelineTest, MissingInt64AndFloatAtomicFeaturesAreNamed) {
  using namespace dsl;
  KernelBuilder k("wide_sums", {64, 1, 1});
  auto total = k.buffer<f32>("total", Access::ReadWrite);
  auto wide = k.buffer<u64>("wide", Access::Write);
  auto local = k.shared<f32>("local", 1);
  auto i = k.global_id().x();
  atomic_add(local[0u], 1.0f);
  atomic_add(total[0u], 1.0f);
  wide[i] = cast<u64>(i) << 40ul;
  const auto kernel = test_kernels::from_dsl(k.build());
  EXPECT_TRUE(kernel.iface.features.int64);
  EXPECT_TRUE(kernel.iface.features.float_atomic_add_buffer);
  EXPECT_TRUE(kernel.iface.features.float_atomic_add_shared);
  DeviceInfo device = ctx().info();
  device.int64 = device.float_atomic_add_buffer = device.float_atomic_add_shared = false;
  const std::string m = error_of([&] { check_device_can_run(device, kernel.iface); });
  for (const char* feature : {"int64 (shaderInt64)", "float_atomic_add_buffer (shaderBufferFloat32AtomicAdd)",
                              "float_atomic_add_shared (shaderSharedFloat32AtomicAdd)"})
    EXPECT_NE(m.find(feature), std::string::npos) << feature << ": " << m;
  EXPECT_NE(m.find("needed by kernel 'wide_sums'"), std::string::npos) << m;
}

TEST_F(PipelineTest, PipelineCacheIsSavedAndReloaded) {
  { Pipeline p = pipeline(test_kernels::add_one()); }
  const auto file = cache_dir_.path() / PipelineCache::file_name(ctx().info());
  EXPECT_FALSE(ctx().pipeline_cache().loaded_from_disk());
  ctx_.reset();  // saves the cache
  EXPECT_TRUE(std::filesystem::exists(file));
  SetUp();
  EXPECT_TRUE(ctx().pipeline_cache().loaded_from_disk());
  EXPECT_EQ(ctx().pipeline_cache().file(), file);
}

TEST_F(PipelineTest, ABadPipelineCacheFileIsIgnored) {
  const auto file = *ctx().pipeline_cache().file();
  ctx_.reset();
  std::ofstream(file, std::ios::binary | std::ios::trunc) << "not a pipeline cache at all, no";
  SetUp();
  EXPECT_FALSE(ctx().pipeline_cache().loaded_from_disk());
  Pipeline p = pipeline(test_kernels::add_one());  // still works
  EXPECT_NE(p.handle(), VK_NULL_HANDLE);
}

TEST(PipelineCacheHeader, MustMatchVendorDeviceAndUuid) {
  DeviceInfo info;
  info.vendor_id = 0x10de;
  info.device_id = 0x2330;
  info.pipeline_cache_uuid.fill(7);
  VkPipelineCacheHeaderVersionOne header{};
  header.headerSize = sizeof header;
  header.headerVersion = VK_PIPELINE_CACHE_HEADER_VERSION_ONE;
  header.vendorID = 0x10de;
  header.deviceID = 0x2330;
  std::fill(std::begin(header.pipelineCacheUUID), std::end(header.pipelineCacheUUID), 7);
  std::string data(reinterpret_cast<const char*>(&header), sizeof header);
  EXPECT_TRUE(PipelineCache::header_matches(data, info));
  EXPECT_FALSE(PipelineCache::header_matches(data.substr(0, 20), info));
  info.pipeline_cache_uuid[3] = 8;
  EXPECT_FALSE(PipelineCache::header_matches(data, info));
  EXPECT_EQ(PipelineCache::file_name(info).rfind("pipeline-cache-10de-2330-", 0), 0u);
}

}  // namespace
}  // namespace bdsl::rt

namespace bdsl::rt {
namespace {

// With pipeline statistics asked for, a device that has VK_KHR_pipeline_executable_properties
// reports some for every pipeline; without, none are kept.
TEST_F(PipelineTest, StatisticsWhereTheDeviceHasThem) {
  EXPECT_FALSE(ctx().pipeline_statistics());
  EXPECT_TRUE(pipeline(test_kernels::scale()).statistics().empty());
  ContextOptions options;
  options.validation = true;
  options.save_pipeline_cache = false;
  options.pipeline_statistics = true;
  Context with(options);
  EXPECT_EQ(with.pipeline_statistics(), with.info().pipeline_statistics);
  const auto kernel = test_kernels::scale();
  Pipeline p(with, shaders_.get(kernel.iface, kernel.glsl));
  const auto stats = p.statistics();
  if (!with.pipeline_statistics()) GTEST_SKIP() << with.info().name << " has no VK_KHR_pipeline_executable_properties";
  ASSERT_FALSE(stats.empty());
  for (const auto& s : stats) EXPECT_FALSE(s.name.empty());
  EXPECT_EQ(with.validation_log()->count(), 0u) << with.validation_log()->summary();
}

}  // namespace
}  // namespace bdsl::rt
