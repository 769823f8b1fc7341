// The model's weights on the device (models/bitnet/device_weights.h), streamed through the upload
// ring or, on a CPU device, read in place from the mapped file: every tensor's bytes as the file
// holds them either way, whatever its type (F32 norms, I2_S projections, the F16 embedding), the
// embedding split into parts of whole rows as a device with a small maxStorageBufferRange gets
// it, progress that counts up to the total, weights read in place that outlive the GgufFile, and
// a file that changes on disk while it loads refused with an error naming it (never a fault on
// lost pages).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <fstream>
#include <string>
#include <thread>

#include "device_test.h"
#include "temp_dir.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/device_weights.h"
#include "models/bitnet/greedy_head.h"

namespace bdsl::test {
namespace {
namespace fs = std::filesystem;

class DeviceWeights : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    dir_.emplace("weights");
    path_ = *dir_ / "tiny.gguf";
    golden::write_synthetic_model(golden::synthetic_preset("tiny"), path_);
  }
  void TearDown() override { dir_.reset(); }
  std::vector<std::byte> device_bytes(const rt::Buffer& b) {
    const auto words = b.download<uint8_t>();
    std::vector<std::byte> out(words.size());
    std::transform(words.begin(), words.end(), out.begin(), [](uint8_t v) { return std::byte(v); });
    return out;
  }
  std::optional<TempDir> dir_;
  fs::path path_;
};

TEST_F(DeviceWeights, EveryTensorArrivesAsTheFileHoldsItAndTheTableInParts) {
  for (const bool in_place : {true, false}) {
  SCOPED_TRACE(in_place ? "read in place where the device can" : "copied");
  const auto file = models::GgufFile::open(path_);
  const auto config = models::BitNetConfig::from_gguf(file);
  const uint32_t rows_per_part = config.vocab_size / 3 + 1;  // three parts, the last shorter
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  const auto w = bitnet::upload_weights(ctx(), file, config, rows_per_part, 0,
                                        [&](uint64_t done, uint64_t total) { progress.emplace_back(done, total); }, in_place);
  // A CPU device that imports host memory reads every tensor where it lies (GGUF's 32-byte
  // alignment is enough); any other device, or in_place false, copies them all.
  EXPECT_EQ(w.in_place_bytes, bitnet::weights_in_place(ctx().info(), in_place) ? w.bytes : 0);
  auto same = [&](const rt::Buffer& b, const std::string& name) {
    const auto want = file.tensor_data(name);
    const auto got = device_bytes(b);
    ASSERT_EQ(got.size(), want.size()) << name;
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << name;
  };
  ASSERT_EQ(w.token_embd.parts.size(), 3u);
  std::vector<std::byte> table;
  for (const auto& part : w.token_embd.parts) {
    const auto bytes = device_bytes(part);
    EXPECT_EQ(bytes.size() % (uint64_t{config.dim} * 2), 0u) << "whole rows in each part";
    table.insert(table.end(), bytes.begin(), bytes.end());
  }
  const auto want_table = file.tensor_data("token_embd.weight");
  ASSERT_EQ(table.size(), want_table.size());
  EXPECT_TRUE(std::equal(table.begin(), table.end(), want_table.begin())) << "the F16 table, split";
  same(w.output_norm, "output_norm.weight");
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    const auto& L = w.layers[l];
    const std::pair<const rt::Buffer*, const char*> tensors[] = {
        {&L.attn_norm, "attn_norm"}, {&L.attn_q, "attn_q"},     {&L.attn_k, "attn_k"},     {&L.attn_v, "attn_v"},
        {&L.attn_output, "attn_output"}, {&L.attn_sub_norm, "attn_sub_norm"}, {&L.ffn_norm, "ffn_norm"},
        {&L.ffn_gate, "ffn_gate"}, {&L.ffn_up, "ffn_up"}, {&L.ffn_down, "ffn_down"}, {&L.ffn_sub_norm, "ffn_sub_norm"}};
    for (const auto& [b, name] : tensors) same(*b, "blk." + std::to_string(l) + "." + name + ".weight");
  }
  ASSERT_FALSE(progress.empty());
  for (size_t i = 1; i < progress.size(); ++i) EXPECT_GT(progress[i].first, progress[i - 1].first);
  EXPECT_EQ(progress.back().first, progress.back().second);
  EXPECT_EQ(progress.back().first, w.bytes);
  }
}

// Weights read in place keep the file mapped: the GgufFile may go before them.
TEST_F(DeviceWeights, WeightsReadInPlaceOutliveTheFileObject) {
  std::vector<std::byte> want;
  bitnet::DeviceWeights w;
  {
    const auto file = models::GgufFile::open(path_);
    const auto config = models::BitNetConfig::from_gguf(file);
    const auto bytes = file.tensor_data("blk.1.ffn_down.weight");
    want.assign(bytes.begin(), bytes.end());
    w = bitnet::upload_weights(ctx(), file, config, config.vocab_size);
  }
  const auto got = device_bytes(w.layers[1].ffn_down);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
}

// The LM head's shadow as the host makes it (the CPU device's path: written in place into memory
// the device reads, elsewhere streamed up): quantize_rows_int8's codes, scales and bounds, in parts.
TEST_F(DeviceWeights, TheHostMadeShadowIsQuantizeRowsInt8sInParts) {
  const auto file = models::GgufFile::open(path_);
  const auto config = models::BitNetConfig::from_gguf(file);
  const uint32_t rows_per_part = config.vocab_size / 2 + 3;  // two parts, the last shorter
  const auto h = bitnet::upload_greedy_head(ctx(), file, config, rows_per_part);
  const auto table = file.tensor_data("token_embd.weight");
  std::vector<uint16_t> f16(table.size() / 2);
  std::memcpy(f16.data(), table.data(), table.size());
  const auto want = bitnet::quantize_rows_int8(f16, config.vocab_size, config.dim);
  ASSERT_EQ(h.parts.size(), 2u);
  std::vector<uint32_t> words;
  for (const auto& part : h.parts) {
    const auto w = part.download<uint32_t>();
    words.insert(words.end(), w.begin(), w.end());
  }
  EXPECT_EQ(words, want.words);
  EXPECT_EQ(h.scale.download<float>(), want.scale);
  EXPECT_EQ(h.bound.download<float>(), want.bound);
}

// A file parsed from memory (no mapping to keep) is copied on every device.
TEST_F(DeviceWeights, AFileReadIntoMemoryIsCopied) {
  std::ifstream in(path_, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  const auto file = models::GgufFile::parse(bytes, "tiny in memory");
  const auto config = models::BitNetConfig::from_gguf(file);
  const auto w = bitnet::upload_weights(ctx(), file, config, config.vocab_size);
  EXPECT_EQ(w.in_place_bytes, 0u);
  const auto want = file.tensor_data("output_norm.weight");
  const auto got = device_bytes(w.output_norm);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()));
}

// Open, then change the file before the weights are read: shorter, longer, or rewritten.
TEST_F(DeviceWeights, AFileChangedOnDiskWhileLoadingIsRefusedNamingIt) {
  const auto size = fs::file_size(path_);
  auto expect_refused = [&](const std::function<void()>& change, const std::string& says) {
    golden::write_synthetic_model(golden::synthetic_preset("tiny"), path_);
    const auto file = models::GgufFile::open(path_);
    const auto config = models::BitNetConfig::from_gguf(file);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a later modification time
    change();
    try {
      bitnet::upload_weights(ctx(), file, config, config.vocab_size);
      FAIL() << "loaded a file that changed: " << says;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(path_.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect_refused([&] { fs::resize_file(path_, size / 2); }, "now " + std::to_string(size / 2));
  expect_refused([&] { fs::resize_file(path_, size + 100); }, "now " + std::to_string(size + 100));
  expect_refused([&] {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(size - 1));
    f.put('\x7f');
  }, "written since");
}

}  // namespace
}  // namespace bdsl::test
