// The synthetic "tiny" model (default seed, as golden/data/tiny), made in memory once per test
// process and shared.
#pragma once
#include <cstddef>
#include <vector>

#include "golden/reference_weights.h"
#include "golden/synthetic_model.h"
#include "models/formats/gguf.h"
#include "models/tokenizer/tokenizer.h"

namespace bdsl::test {

struct TinyModel {
  std::vector<std::byte> bytes;
  models::GgufFile file;
  golden::ReferenceWeights weights;
  models::Tokenizer tokenizer;

  explicit TinyModel(std::vector<std::byte> b)
      : bytes(std::move(b)),
        file(models::GgufFile::parse(bytes, "tiny.gguf")),
        weights(golden::ReferenceWeights::load(file)),
        tokenizer(models::Tokenizer::from_gguf(file)) {}
};

inline const TinyModel& tiny_model() {
  static const TinyModel model(golden::make_synthetic_model(golden::synthetic_preset("tiny")).to_bytes());
  return model;
}

}  // namespace bdsl::test
