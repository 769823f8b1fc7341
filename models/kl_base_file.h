// The file `bitnet-dsl perplexity --kl-divergence-base FILE` writes: the base model's
// log-probabilities at every scored position, so another model (another build, device or
// quantization) can be compared with it later (llama-perplexity's --kl-divergence-base, in a
// format of our own). Little-endian:
//   "BDSLKLD1"  u32 vocab  u32 context  u32 windows  u32 scored (positions per window)
//   u32 tokens[windows * context]              the windows as evaluated (BOS first)
//   f16 log_probs[windows * scored][vocab]     log softmax of each scored position's logits
// A reader checks the magic, the sizes and the length, and names what does not match.
#pragma once
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace bdsl::models {

struct KlBaseHeader {
  uint32_t vocab = 0, context = 0, windows = 0, scored = 0;
  uint64_t rows() const { return uint64_t{windows} * scored; }
};

class KlBaseWriter {
 public:
  // Throws std::runtime_error naming the file when it cannot be written.
  KlBaseWriter(const std::string& path, const KlBaseHeader& header, std::span<const int32_t> tokens);
  void write_row(std::span<const float> logits);  // in order; vocab logits -> log-probabilities
  void close();  // throws if fewer rows than the header says were written, or on a write error

 private:
  std::string path_;
  KlBaseHeader header_;
  std::ofstream out_;
  uint64_t rows_ = 0;
};

class KlBaseReader {
 public:
  // Throws std::runtime_error naming the file and the problem (not a base file, truncated, ...).
  explicit KlBaseReader(const std::string& path);
  const KlBaseHeader& header() const { return header_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  std::vector<float> next_row();  // the next position's log-probabilities (vocab of them, renormalized)

 private:
  std::string path_;
  KlBaseHeader header_;
  std::vector<int32_t> tokens_;
  std::ifstream in_;
  uint64_t rows_ = 0;
};

}  // namespace bdsl::models
