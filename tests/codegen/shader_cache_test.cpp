// ShaderCache: memory hits, disk hits across instances, keys that change with every option,
// corrupt files recompiled.
#include <gtest/gtest.h>

#include <fstream>

#include "codegen/shader_cache.h"
#include "test_kernels.h"
#include "vulkan_test.h"

namespace bdsl::codegen {
namespace {

using rt::TempDir;

TEST(ShaderCache, SecondGetIsAMemoryHit) {
  ShaderCache cache(std::nullopt);
  const auto k = test_kernels::add_one();
  const CompiledKernel& first = cache.get(k.iface, k.glsl);
  const CompiledKernel& second = cache.get(k.iface, k.glsl);
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().memory_hits, 1u);
  EXPECT_GT(cache.stats().compile_ms, 0.0);
  EXPECT_EQ(first.key, ShaderCache::key_of(k.glsl, {}));
  EXPECT_EQ(first.iface.name, "add_one");
}

TEST(ShaderCache, SameSourceWithAnotherInterfaceKeepsItsOwnInterface) {
  ShaderCache cache(std::nullopt);
  auto k = test_kernels::add_one();
  const CompiledKernel& first = cache.get(k.iface, k.glsl);
  k.iface.workgroup_size = {32, 1, 1};
  const CompiledKernel& second = cache.get(k.iface, k.glsl);
  EXPECT_NE(&first, &second);
  EXPECT_EQ(second.iface.workgroup_size[0], 32u);
  EXPECT_EQ(first.iface.workgroup_size[0], 64u);
  EXPECT_EQ(second.spirv, first.spirv);
  EXPECT_EQ(cache.stats().misses, 1u);  // one binary, compiled once
  EXPECT_EQ(cache.stats().memory_hits, 1u);
}

TEST(ShaderCache, AnotherInstanceOnTheSameDirectoryCompilesNothing) {
  TempDir dir;
  const auto k = test_kernels::scale();
  std::vector<uint32_t> compiled;
  {
    ShaderCache writer(dir.path());
    compiled = writer.get(k.iface, k.glsl).spirv;
    EXPECT_TRUE(std::filesystem::exists(writer.file_for(ShaderCache::key_of(k.glsl, {}))));
  }
  ShaderCache reader(dir.path());
  EXPECT_EQ(reader.get(k.iface, k.glsl).spirv, compiled);
  EXPECT_EQ(reader.stats().disk_hits, 1u);
  EXPECT_EQ(reader.stats().misses, 0u);
  EXPECT_NE(reader.report().find("1 disk hits"), std::string::npos) << reader.report();
}

// Runs only as the child of the test below, which points it at the parent's cache directory.
TEST(ShaderCacheChild, FindsTheParentsBinaryOnDisk) {
  const char* dir = std::getenv("BDSL_TEST_PARENT_CACHE");
  if (!dir) GTEST_SKIP() << "run by ShaderCache.AFreshProcessHitsTheDiskCache";
  ShaderCache cache(std::filesystem::path{dir});
  const auto k = test_kernels::scale();
  cache.get(k.iface, k.glsl);
  EXPECT_EQ(cache.stats().disk_hits, 1u);
  EXPECT_EQ(cache.stats().misses, 0u);
}

TEST(ShaderCache, AFreshProcessHitsTheDiskCache) {
  TempDir dir;
  ShaderCache parent(dir.path());
  const auto k = test_kernels::scale();
  parent.get(k.iface, k.glsl);
  const std::string command = "BDSL_TEST_PARENT_CACHE='" + dir.path().string() +
                              "' '" + std::filesystem::read_symlink("/proc/self/exe").string() +
                              "' --gtest_filter=ShaderCacheChild.* "
                              "--gtest_brief=1 > /dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

TEST(ShaderCache, KeyChangesWhenAnyInputChanges) {
  const std::string glsl = test_kernels::add_one().glsl;
  const std::string base = ShaderCache::key_of(glsl, {});
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(ShaderCache::key_of(glsl, {}), base);
  EXPECT_NE(ShaderCache::key_of(glsl + " ", {}), base);
  EXPECT_NE(ShaderCache::key_of(glsl, {.vulkan_minor = 3}), base);
  EXPECT_NE(ShaderCache::key_of(glsl, {.optimize = false}), base);
  EXPECT_NE(ShaderCache::key_of(glsl, {.validate = false}), base);
  EXPECT_NE(ShaderCache::key_of(glsl, {.debug_info = true}), base);
  EXPECT_NE(ShaderCache::key_of(glsl, {.defines = {{"A", "1"}}}), base);
  EXPECT_NE(ShaderCache::key_of(glsl, {.defines = {{"A", "1"}}}),
            ShaderCache::key_of(glsl, {.defines = {{"A", "2"}}}));
  // Lengths are part of the serialisation, so shifting text between name and value changes it.
  EXPECT_NE(ShaderCache::key_of(glsl, {.defines = {{"A=", "1"}}}),
            ShaderCache::key_of(glsl, {.defines = {{"A", "=1"}}}));
  EXPECT_NE(ShaderCache::key_of(glsl, {.spec_constants = {{0, 64}}}), base);
  EXPECT_NE(ShaderCache::key_of(glsl, {.spec_constants = {{0, 64}}}),
            ShaderCache::key_of(glsl, {.spec_constants = {{0, 32}}}));
}

TEST(ShaderCache, CorruptOrTruncatedFilesAreRecompiledAndRewritten) {
  TempDir dir;
  const auto k = test_kernels::add_one();
  const auto path = ShaderCache(dir.path()).file_for(ShaderCache::key_of(k.glsl, {}));
  std::vector<uint32_t> good;
  {
    ShaderCache cache(dir.path());
    good = cache.get(k.iface, k.glsl).spirv;
  }
  const auto full_size = std::filesystem::file_size(path);
  for (int damage = 0; damage < 3; ++damage) {
    if (damage == 0) std::filesystem::resize_file(path, full_size - 8);  // truncated
    if (damage == 1) std::filesystem::resize_file(path, 10);             // header cut
    if (damage == 2) {                                                    // a flipped byte
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(full_size - 4));
      f.put('\x5a');
    }
    ShaderCache cache(dir.path());
    EXPECT_EQ(cache.get(k.iface, k.glsl).spirv, good) << "damage " << damage;
    EXPECT_EQ(cache.stats().misses, 1u) << "damage " << damage;
    EXPECT_EQ(cache.stats().disk_hits, 0u) << "damage " << damage;
    EXPECT_EQ(std::filesystem::file_size(path), full_size) << "not rewritten, damage " << damage;
  }
}

TEST(ShaderCache, MemoryOnlyCacheWritesNoFiles) {
  TempDir dir;
  ShaderCache cache(std::nullopt);
  const auto k = test_kernels::add_one();
  cache.get(k.iface, k.glsl);
  EXPECT_FALSE(cache.dir().has_value());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_NE(cache.report().find("memory only"), std::string::npos);
}

TEST(ShaderCache, CompileErrorsPropagateAndCacheNothing) {
  ShaderCache cache(std::nullopt);
  const auto k = test_kernels::broken();
  EXPECT_THROW(cache.get(k.iface, k.glsl), CompileError);
  EXPECT_THROW(cache.get(k.iface, k.glsl), CompileError);
  EXPECT_EQ(cache.stats().memory_hits, 0u);
}

// Sets an environment variable for one scope and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ShaderCache, DefaultDirectoryFollowsTheEnvironment) {
  {
    ScopedEnv explicit_dir("BDSL_CACHE_DIR", "/tmp/bdsl-explicit");
    EXPECT_EQ(default_cache_dir(), std::filesystem::path("/tmp/bdsl-explicit"));
  }
  ScopedEnv no_explicit_dir("BDSL_CACHE_DIR", nullptr);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/tmp/xdg");
    EXPECT_EQ(default_cache_dir(), std::filesystem::path("/tmp/xdg/bitnet-dsl"));
  }
  ScopedEnv no_xdg("XDG_CACHE_HOME", nullptr);
  ScopedEnv home("HOME", "/tmp/home");
  EXPECT_EQ(default_cache_dir(), std::filesystem::path("/tmp/home/.cache/bitnet-dsl"));
}

}  // namespace
}  // namespace bdsl::codegen
