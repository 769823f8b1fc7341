// Fixture for tests that touch the device: a Context with the validation layer requested, an
// in-memory shader cache, and a TearDown that destroys the context and fails the test if the
// layer said anything (leaks are reported when the device is destroyed, so check after that).
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "codegen/shader_cache.h"
#include "runtime/context.h"
#include "runtime/pipeline.h"
#include "temp_dir.h"
#include "test_kernels.h"

namespace bdsl::rt {

// What `f` threw, as its message ("" when it threw nothing): for tests of error messages.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

using test::TempDir;  // tests/support/temp_dir.h

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  Context& ctx() { return *ctx_; }
  // Compiles (memory-cached) and builds the pipeline of a test kernel.
  Pipeline pipeline(const test_kernels::TestKernel& kernel);

  TempDir cache_dir_;
  codegen::ShaderCache shaders_{std::nullopt};
  std::unique_ptr<Context> ctx_;
  std::shared_ptr<const ValidationLog> log_;
};

}  // namespace bdsl::rt
