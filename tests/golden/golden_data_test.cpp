#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "golden/golden_compare.h"
#include "golden/golden_data.h"
#include "golden/npy.h"
#include "golden/splitmix.h"
#include "tests/golden/tiny_model.h"

namespace bdsl::golden {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(BDSL_SOURCE_DIR) / "golden" / "data" / "tiny";
constexpr const char* kRegenerate =
    "\n(if the change is intended: bitnet-dsl make-golden --preset tiny --out golden/data/tiny)";

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// One reference run shared by the tests of this file.
const GoldenRun& fresh_run() {
  static const GoldenRun run = run_golden(test::tiny_model().weights, test::tiny_model().tokenizer,
                                          default_golden_spec("tiny"));
  return run;
}

TEST(GoldenData, ModelGeneratorStillMakesTheGoldenModel) {
  const auto& bytes = test::tiny_model().bytes;
  uint64_t h = fnv1a64("");
  for (std::byte b : bytes) h = (h ^ static_cast<unsigned char>(b)) * 0x100000001B3ull;
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(h));
  EXPECT_NE(read_text(kDir / "manifest.json").find(hex), std::string::npos)
      << "the synthetic tiny model (fnv1a64 " << hex << ") is not the one in manifest.json" << kRegenerate;
}

TEST(GoldenData, PromptAndContinuationAreExact) {
  const auto spec = default_golden_spec("tiny");
  EXPECT_EQ(read_text(kDir / "prompt.txt"), spec.prompt);
  EXPECT_EQ(read_npy_i32(kDir / "prompt.npy").data, fresh_run().prompt_ids) << kRegenerate;
  EXPECT_EQ(read_npy_i32(kDir / "continuation.npy").data, fresh_run().continuation) << kRegenerate;
}

TEST(GoldenData, EveryIntermediateMatchesWithinTolerance) {
  const auto& rec = fresh_run().prompt_pass;
  ASSERT_GT(rec.names().size(), 60u);
  for (const std::string& name : rec.names()) {
    const auto golden = read_npy_f32(kDir / (name + ".npy"));
    const MatrixF& m = rec.tensor(name);
    ASSERT_EQ(golden.shape, (std::vector<uint64_t>{m.rows, m.cols})) << name << kRegenerate;
    const TensorDiff d = compare_tensors(golden.data, m.data);
    EXPECT_TRUE(within_tolerance(d, kGoldenRelativeTolerance))
        << name << ": max abs error " << d.max_abs_error << " (relative " << d.max_rel_error << ") at "
        << d.worst_index << kRegenerate;
  }
  const auto logits = read_npy_f32(kDir / "logits.npy");
  EXPECT_TRUE(within_tolerance(compare_tensors(logits.data, fresh_run().logits.data), kGoldenRelativeTolerance));
}

TEST(GoldenData, AccumulatorsAreExact) {
  const auto& rec = fresh_run().prompt_pass;
  ASSERT_FALSE(rec.accumulator_names().empty());
  for (const std::string& name : rec.accumulator_names()) {
    EXPECT_EQ(read_npy_i32(kDir / (name + ".npy")).data, rec.accumulators(name).data) << name << kRegenerate;
  }
}

TEST(GoldenData, FolderStaysSmall) {
  std::uintmax_t total = 0;
  for (const auto& e : fs::directory_iterator(kDir)) total += e.file_size();
  EXPECT_LT(total, 4u << 20);
}

}  // namespace
}  // namespace bdsl::golden
