// Mainline llama.cpp's files on the device: projections in its ternary types (models/formats/tq.h),
// the tiny synthetic model written as TQ2_0 and TQ1_0, repacked into I2_S's layout at load, run as
// the I2_S file of the same weights; a tensor with two scales is refused before anything loads;
// its per-projection `.scale` multipliers are folded into the projections' scales.
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <fstream>
#include <set>

#include "device_test.h"
#include "temp_dir.h"
#include "golden/reference_model.h"
#include "golden/reference_weights.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/bitnet_model.h"

namespace bdsl::test {
namespace {
namespace fs = std::filesystem;

class TqModel : public DeviceTest {
 protected:
  static void SetUpTestSuite() {
    dir_.emplace("tq-model");
  }
  static void TearDownTestSuite() { dir_.reset(); }

  inline static std::optional<TempDir> dir_;
};

// The CPU reference's logits after the prompt (its last position).
std::vector<float> reference_logits(const models::GgufFile& file, const std::vector<int32_t>& prompt) {
  const auto weights = golden::ReferenceWeights::load(file);
  golden::ReferenceModel ref(weights);
  const golden::MatrixF all = ref.forward(prompt);
  const auto last = all.row(all.rows - 1);
  return {last.begin(), last.end()};
}

// Mainline llama.cpp's ternary types (models/formats/tq.h): the same weights written as TQ2_0 and
// TQ1_0 (repacked into I2_S's layout at load) and as I2_S with the same F16-rounded scales give the
// same logits, bit for bit, on the device and in the CPU reference, and the same tokens.
TEST_F(TqModel, TqFilesRunAsTheI2sFileWithTheSameScales) {
  const std::vector<int32_t> prompt = {990, 312, 626, 7, 41};
  std::vector<std::vector<float>> logits, reference;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<uint64_t> weight_bytes;
  for (models::GgmlType type : {models::GgmlType::I2_S, models::GgmlType::TQ2_0, models::GgmlType::TQ1_0}) {
    auto o = golden::synthetic_preset("tiny");
    o.weight_type = type;
    o.f16_scales = true;
    const auto path = *dir_ / ("tiny-" + std::string(models::ggml_type_name(type)) + ".gguf");
    golden::write_synthetic_model(o, path);
    const auto file = models::GgufFile::open(path);
    EXPECT_EQ(file.tensor("blk.2.ffn_down.weight").type, type);
    const auto config = models::BitNetConfig::from_gguf(file);
    bitnet::BitNetModel model(ctx(), file, config);
    const auto out = model.prefill(prompt, 0);
    logits.push_back(model.logits());
    std::vector<int32_t> t = {out.argmax};
    model.decode_greedy(out.argmax, uint32_t(prompt.size()), 8, [&](int32_t next) {
      t.push_back(next);
      return true;
    });
    tokens.push_back(t);
    weight_bytes.push_back(model.weight_bytes());
    reference.push_back(reference_logits(file, prompt));
  }
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(tokens[i], tokens[0]) << "file " << i;
    EXPECT_EQ(weight_bytes[i], weight_bytes[0]) << "uploaded in I2_S's layout";
    ASSERT_EQ(logits[i].size(), logits[0].size());
    EXPECT_EQ(std::memcmp(logits[i].data(), logits[0].data(), logits[0].size() * 4), 0) << "device logits, file " << i;
    ASSERT_EQ(reference[i].size(), reference[0].size());
    EXPECT_EQ(std::memcmp(reference[i].data(), reference[0].data(), reference[0].size() * 4), 0) << "reference, file " << i;
  }
  EXPECT_GT(std::set<int32_t>(tokens[0].begin(), tokens[0].end()).size(), 2u);
}

// Mainline's `bitnet` file with a `.scale` multiplier after every projection: each projection's
// scale divided by 4 and the multiplier 4 (exact in binary) are the weights of the file without
// them, so the device and the reference give that file's logits bit for bit, through the copy
// path (a TQ2_0 file) and the I2_S one, with adjacent-pair RoPE's reordered rows too (llama).
TEST_F(TqModel, ScaleTensorsFoldIntoTheProjectionsScales) {
  const std::vector<int32_t> prompt = {990, 312, 626, 7, 41};
  for (const char* arch : {"bitnet", "llama"})
    for (models::GgmlType type : {models::GgmlType::I2_S, models::GgmlType::TQ2_0}) {
      SCOPED_TRACE(std::string(arch) + " " + std::string(models::ggml_type_name(type)));
      std::vector<std::vector<float>> logits, reference;
      for (float k : {1.0f, 4.0f}) {
        auto o = golden::synthetic_preset("tiny");
        o.architecture = arch;
        o.weight_type = type;
        o.projection_multiplier = k;
        const auto path = *dir_ / fmt::format("scaled-{}-{}-{}.gguf", arch, models::ggml_type_name(type), k);
        golden::write_synthetic_model(o, path);
        const auto file = models::GgufFile::open(path);
        EXPECT_EQ(file.find_tensor("blk.1.ffn_down.scale") != nullptr, k != 1.0f);
        const auto config = models::BitNetConfig::from_gguf(file);
        bitnet::BitNetModel model(ctx(), file, config);
        model.prefill(prompt, 0);
        logits.push_back(model.logits());
        reference.push_back(reference_logits(file, prompt));
      }
      ASSERT_EQ(logits[1].size(), logits[0].size());
      EXPECT_EQ(std::memcmp(logits[1].data(), logits[0].data(), logits[0].size() * 4), 0) << "device logits";
      EXPECT_EQ(std::memcmp(reference[1].data(), reference[0].data(), reference[0].size() * 4), 0) << "reference";
    }
}

// A TQ tensor whose blocks have different scales cannot take I2_S's one scale: the file is
// refused before anything loads, naming the tensor, the blocks and where its data starts.
TEST_F(TqModel, ATqTensorWithTwoScalesIsRefusedNamingIt) {
  auto o = golden::synthetic_preset("tiny");
  o.weight_type = models::GgmlType::TQ2_0;
  const auto path = *dir_ / "tiny-two-scales.gguf";
  golden::write_synthetic_model(o, path);
  std::vector<std::byte> bytes(fs::file_size(path));
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  const uint64_t at = models::GgufFile::parse(bytes).tensor("blk.1.attn_v.weight").file_offset;
  const uint16_t d = 0x3C00;  // 1.0, not the tensor's scale, in block 3
  std::memcpy(bytes.data() + at + 4 * 66 - 2, &d, 2);
  try {
    models::BitNetConfig::from_gguf(models::GgufFile::parse(bytes, "two-scales.gguf"));
    FAIL() << "a tensor with two scales was accepted";
  } catch (const models::BitNetConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("two-scales.gguf"), std::string::npos) << what;
    EXPECT_NE(what.find("tensor \"blk.1.attn_v.weight\": TQ2_0 blocks 0 and 3 have different scales"), std::string::npos) << what;
    EXPECT_NE(what.find("its data starts at file byte " + std::to_string(at)), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace bdsl::test
