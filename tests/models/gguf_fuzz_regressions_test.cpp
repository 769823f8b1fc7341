// Replays every input under tests/fuzz/gguf/regressions (inputs that once crashed, hung or exhausted
// memory under the fuzzer) through the same walk as the fuzzer, in the ordinary test build.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "models/bitnet_config.h"
#include "models/formats/gguf.h"

namespace bdsl::models {
namespace {

std::vector<std::byte> read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

// Parse, render every value, read every tensor, check the BitNet config: only our errors escape.
void walk(const std::vector<std::byte>& bytes) {
  try {
    const GgufFile f = GgufFile::parse(bytes, "regression.gguf");
    for (const auto& kv : f.metadata()) (void)kv.value.to_string(4, true);
    for (const auto& t : f.tensors()) (void)f.tensor_data(t);
    BitNetConfig::from_gguf(f);
  } catch (const GgufError&) {
  } catch (const BitNetConfigError&) {
  }
}

TEST(GgufFuzzRegressions, EveryCommittedInputIsHandled) {
  const std::filesystem::path dir = std::filesystem::path(BDSL_SOURCE_DIR) / "tests/fuzz/gguf/regressions";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().filename().string());
    EXPECT_NO_THROW(walk(read_all(entry.path())));
    ++count;
  }
  EXPECT_GT(count, 0);
}

TEST(GgufFuzzRegressions, HugeBlockCountIsOneConfigError) {
  const auto bytes = read_all(std::filesystem::path(BDSL_SOURCE_DIR) /
                              "tests/fuzz/gguf/regressions/oom-huge-block-count.gguf");
  const GgufFile f = GgufFile::parse(bytes, "regression.gguf");
  try {
    BitNetConfig::from_gguf(f);
    FAIL() << "accepted";
  } catch (const BitNetConfigError& e) {
    EXPECT_LE(e.violations().size(), 8u) << e.what();
  }
}

}  // namespace
}  // namespace bdsl::models
