// The KL-divergence base file (models/kl_base_file.h) read defensively: a round trip, then
// crafted headers (sizes that would wrap, impossible fields, a wrong magic, a short file), each
// refused with a message that names the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/kl_base_file.h"
#include "temp_dir.h"

namespace bdsl::models {
namespace {

namespace fs = std::filesystem;

// Each test's files live in a TempDir of their own (removed with them, pass or fail).

void write_header(const fs::path& path, const char* magic, uint32_t vocab, uint32_t context, uint32_t windows,
                  uint32_t scored, size_t extra_bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(magic, 8);
  const uint32_t words[4] = {vocab, context, windows, scored};
  out.write(reinterpret_cast<const char*>(words), sizeof(words));
  out << std::string(extra_bytes, '\0');
}

std::string error_of(const fs::path& path) {
  try {
    KlBaseReader reader(path.string());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(KlBaseFile, RoundTripOfLogProbabilities) {
  const test::TempDir dir("kl-base");
  const auto path = dir / "ok";
  const std::vector<int32_t> tokens = {1, 2, 2, 0};
  {
    KlBaseWriter w(path.string(), {3, 4, 1, 1}, tokens);
    w.write_row(std::vector<float>{0.0f, std::log(3.0f), -50.0f});
    w.close();
  }
  KlBaseReader r(path.string());
  EXPECT_EQ(r.header().vocab, 3u);
  EXPECT_EQ(r.tokens(), tokens);
  const auto row = r.next_row();
  EXPECT_NEAR(row[0], std::log(0.25), 1e-3);
  EXPECT_NEAR(row[1], std::log(0.75), 1e-3);
  EXPECT_THROW(r.next_row(), std::out_of_range);
}

TEST(KlBaseFile, CraftedHeadersAreRefusedNamingTheProblem) {
  const test::TempDir dir("kl-base");
  const auto path = dir / "bad";
  // Sizes whose product wraps past 2^64 must not pass the length check.
  write_header(path, "BDSLKLD1", 0x80000000u, 0xffffffffu, 0xffffffffu, 0x7fffffffu, 64);
  EXPECT_NE(error_of(path).find("(truncated)"), std::string::npos) << error_of(path);
  write_header(path, "BDSLKLD1", 1000, 16, 2, 7, 10);
  EXPECT_NE(error_of(path).find("(truncated)"), std::string::npos) << error_of(path);
  write_header(path, "BDSLKLD1", 0, 16, 2, 7, 0);
  EXPECT_NE(error_of(path).find("is not possible"), std::string::npos) << error_of(path);
  write_header(path, "BDSLKLD1", 10, 16, 2, 16, 0);
  EXPECT_NE(error_of(path).find("is not possible"), std::string::npos) << error_of(path);
  write_header(path, "GGUF\3\0\0\0", 10, 16, 2, 7, 0);
  EXPECT_NE(error_of(path).find("is not a KL-divergence base file"), std::string::npos) << error_of(path);
  // A token outside the vocabulary.
  write_header(path, "BDSLKLD1", 4, 2, 1, 0, 0);
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    const int32_t tokens[2] = {1, 9};
    out.write(reinterpret_cast<const char*>(tokens), sizeof(tokens));
  }
  EXPECT_NE(error_of(path).find("token id 9 outside its vocabulary of 4"), std::string::npos) << error_of(path);
  EXPECT_NE(error_of(dir / "missing").find("KL-divergence base file"), std::string::npos);
}

}  // namespace
}  // namespace bdsl::models
