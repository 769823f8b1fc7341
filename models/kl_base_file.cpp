#include "models/kl_base_file.h"

#include <filesystem>
#include <stdexcept>

#include "models/numerics/half_float.h"
#include "models/numerics/logit_stats.h"

namespace bdsl::models {

namespace {

constexpr char kMagic[8] = {'B', 'D', 'S', 'L', 'K', 'L', 'D', '1'};
constexpr uint64_t kHeaderBytes = 8 + 4 * 4;

}  // namespace

KlBaseWriter::KlBaseWriter(const std::string& path, const KlBaseHeader& header, std::span<const int32_t> tokens)
    : path_(path), header_(header), out_(path, std::ios::binary | std::ios::trunc) {
  if (!out_) throw std::runtime_error("cannot write the KL-divergence base file '" + path + "'");
  if (tokens.size() != uint64_t{header.windows} * header.context)
    throw std::invalid_argument("KL base: " + std::to_string(tokens.size()) + " tokens for " +
                                std::to_string(header.windows) + " windows of " + std::to_string(header.context));
  const uint32_t words[4] = {header.vocab, header.context, header.windows, header.scored};
  out_.write(kMagic, 8);
  out_.write(reinterpret_cast<const char*>(words), sizeof(words));
  out_.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 4));
}

void KlBaseWriter::write_row(std::span<const float> logits) {
  if (logits.size() != header_.vocab)
    throw std::invalid_argument("KL base: a row of " + std::to_string(logits.size()) + " logits, expected " +
                                std::to_string(header_.vocab));
  if (rows_ >= header_.rows()) throw std::logic_error("KL base: more rows than the header says");
  const auto lp = numerics::log_softmax(logits);
  std::vector<uint16_t> half(lp.size());
  for (size_t i = 0; i < lp.size(); ++i) half[i] = numerics::f32_to_f16(float(lp[i]));
  out_.write(reinterpret_cast<const char*>(half.data()), std::streamsize(half.size() * 2));
  ++rows_;
}

void KlBaseWriter::close() {
  out_.close();
  if (!out_) throw std::runtime_error("writing the KL-divergence base file '" + path_ + "' failed");
  if (rows_ != header_.rows())
    throw std::logic_error("KL base: " + std::to_string(rows_) + " rows written, " + std::to_string(header_.rows()) +
                           " expected");
}

KlBaseReader::KlBaseReader(const std::string& path) : path_(path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error("KL-divergence base file '" + path + "': " + ec.message());
  in_.open(path, std::ios::binary);
  char magic[8] = {};
  uint32_t words[4] = {};
  if (!in_ || size < kHeaderBytes || !in_.read(magic, 8) || std::string(magic, 8) != std::string(kMagic, 8))
    throw std::runtime_error("'" + path + "' is not a KL-divergence base file (written by `bitnet-dsl perplexity "
                             "--kl-divergence-base`)");
  in_.read(reinterpret_cast<char*>(words), sizeof(words));
  header_ = {words[0], words[1], words[2], words[3]};
  if (header_.vocab == 0 || header_.context == 0 || header_.windows == 0 || header_.scored >= header_.context)
    throw std::runtime_error("KL-divergence base file '" + path + "': a header of vocab " + std::to_string(header_.vocab) +
                             ", context " + std::to_string(header_.context) + ", windows " +
                             std::to_string(header_.windows) + ", scored " + std::to_string(header_.scored) +
                             " is not possible");
  // Each term against the bytes there are, by division first: a crafted header must not wrap
  // the sum round to the file's size.
  const uint64_t token_count = uint64_t{header_.windows} * header_.context;  // < 2^64: two u32
  const uint64_t rest = size - kHeaderBytes;
  const bool fits = token_count <= rest / 4 && header_.rows() <= (rest - 4 * token_count) / 2 / header_.vocab;
  const uint64_t expected = fits ? kHeaderBytes + 4 * token_count + 2 * header_.rows() * header_.vocab : 0;
  if (size != expected)
    throw std::runtime_error("KL-divergence base file '" + path + "' is " + std::to_string(size) + " bytes; its header (" +
                             std::to_string(header_.windows) + " windows of " + std::to_string(header_.context) +
                             " tokens over a vocabulary of " + std::to_string(header_.vocab) + ") needs " +
                             (fits ? std::to_string(expected) : "more") + (!fits || size < expected ? " (truncated)" : ""));
  tokens_.resize(token_count);
  in_.read(reinterpret_cast<char*>(tokens_.data()), std::streamsize(token_count * 4));
  for (int32_t t : tokens_)
    if (t < 0 || uint32_t(t) >= header_.vocab)
      throw std::runtime_error("KL-divergence base file '" + path + "' holds token id " + std::to_string(t) +
                               " outside its vocabulary of " + std::to_string(header_.vocab));
}

std::vector<float> KlBaseReader::next_row() {
  if (rows_ >= header_.rows()) throw std::out_of_range("KL base '" + path_ + "': no more rows");
  std::vector<uint16_t> half(header_.vocab);
  if (!in_.read(reinterpret_cast<char*>(half.data()), std::streamsize(half.size() * 2)))
    throw std::runtime_error("reading the KL-divergence base file '" + path_ + "' failed at row " + std::to_string(rows_));
  ++rows_;
  std::vector<float> stored(half.size());
  for (size_t i = 0; i < half.size(); ++i) stored[i] = numerics::f16_to_f32(half[i]);
  // Normalized again: the F16 rounding leaves the probabilities summing to 1 +- ~1e-4, which
  // would add that much to every KL divergence; as logits of a softmax they sum to 1.
  const auto normalized = numerics::log_softmax(stored);
  return std::vector<float>(normalized.begin(), normalized.end());
}

}  // namespace bdsl::models
