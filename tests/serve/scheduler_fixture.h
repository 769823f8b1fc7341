// The scheduler tests' shared parts: the tiny synthetic model on a real device (lavapipe in CI),
// a Collector that records one request's text and end, and requests built from text.
#pragma once
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>

#include "device_test.h"
#include "temp_dir.h"
#include "golden/synthetic_model.h"
#include "models/bitnet/bitnet_model.h"
#include "models/sequential_decoder.h"
#include "serve/scheduler.h"

namespace bdsl::test {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using serve::FinishReason;

// One request's text and end, filled by the scheduler's callbacks. `hold` makes on_text block
// until release(): the worker stays inside this request, so the test decides what happens next.
struct Collector {
  std::mutex m;
  std::condition_variable cv;
  std::string text;
  std::vector<std::string> pieces;
  std::optional<FinishReason> reason;
  serve::Usage usage;
  bool hold = false, in_callback = false;

  void attach(serve::GenerationRequest& r) {
    r.on_text = [this](std::string_view t) {
      std::unique_lock lock(m);
      text += t;
      pieces.emplace_back(t);
      in_callback = true;
      cv.notify_all();
      cv.wait(lock, [&] { return !hold; });
      in_callback = false;
    };
    r.on_finish = [this](FinishReason f, const serve::Usage& u) {
      std::lock_guard lock(m);
      reason = f;
      usage = u;
      cv.notify_all();
    };
  }
  bool wait_end(std::chrono::seconds limit = 60s) {
    std::unique_lock lock(m);
    return cv.wait_for(lock, limit, [&] { return reason.has_value(); });
  }
  bool wait_in_callback() {
    std::unique_lock lock(m);
    return cv.wait_for(lock, 60s, [&] { return in_callback; });
  }
  void release() {
    std::lock_guard lock(m);
    hold = false;
    cv.notify_all();
  }
};

class SchedulerTest : public DeviceTest {
 protected:
  static void SetUpTestSuite() {
    dir_.emplace("serve");
    golden::write_synthetic_model(golden::synthetic_preset("tiny"), *dir_ / "tiny.gguf");
  }
  static void TearDownTestSuite() { dir_.reset(); }

  void SetUp() override {
    DeviceTest::SetUp();
    file_.emplace(models::GgufFile::open(*dir_ / "tiny.gguf"));
    tokenizer_.emplace(models::Tokenizer::from_gguf(*file_));
  }
  void TearDown() override {
    decoder_.reset();
    model_.reset();
    DeviceTest::TearDown();
  }

  // The model as `serve` builds it (top-k candidates for sampling).
  std::unique_ptr<bitnet::BitNetModel> make_model(uint32_t context = 0) {
    auto config = models::BitNetConfig::from_gguf(*file_);
    if (context) config.context_length = context;
    bitnet::ModelOptions o;
    o.top_k = 128;
    o.greedy_head = false;
    return std::make_unique<bitnet::BitNetModel>(ctx(), *file_, config, o);
  }
  // That model as one slot, as `serve` runs it.
  models::BatchDecoder& decoder(uint32_t context = 0, uint32_t prefill_chunk = 512) {
    model_ = make_model(context);
    decoder_ = std::make_unique<models::SequentialDecoder>(*model_, prefill_chunk, 0);
    return *decoder_;
  }

  serve::GenerationRequest request(const std::string& prompt, uint32_t max_tokens, float temperature = 0,
                                   uint64_t seed = 0) {
    serve::GenerationRequest r;
    r.prompt = tokenizer_->encode(prompt, true);
    r.max_tokens = max_tokens;
    r.sampling = {temperature, 0, 1.0f, 0.0f, seed};
    return r;
  }

  // Submits and waits for the end.
  Collector& generate(serve::Scheduler& s, serve::GenerationRequest r) {
    collectors_.push_back(std::make_unique<Collector>());
    collectors_.back()->attach(r);
    s.submit(std::move(r));
    EXPECT_TRUE(collectors_.back()->wait_end());
    return *collectors_.back();
  }

  inline static std::optional<TempDir> dir_;
  std::optional<models::GgufFile> file_;
  std::optional<models::Tokenizer> tokenizer_;
  std::unique_ptr<bitnet::BitNetModel> model_;
  std::unique_ptr<models::BatchDecoder> decoder_;
  std::vector<std::unique_ptr<Collector>> collectors_;
};


}  // namespace bdsl::test
