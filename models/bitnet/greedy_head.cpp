#include "models/bitnet/greedy_head.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "models/numerics/half_float.h"
#include "runtime/graph.h"
#include "runtime/upload_ring.h"

namespace bdsl::bitnet {
namespace {

void quantize_row(const uint16_t* f16, uint32_t cols, uint32_t* words, float& scale, float* bound) {
  std::vector<double> w(cols);
  double amax = 0;
  for (uint32_t i = 0; i < cols; ++i) amax = std::max(amax, std::abs(w[i] = numerics::f16_to_f32(f16[i])));
  const float s = float(amax / 127.0);
  double err2 = 0, q2 = 0, w2 = 0;
  for (uint32_t i = 0; i < cols; i += 4) {
    uint32_t word = 0;
    for (uint32_t j = 0; j < 4; ++j) {
      const double v = w[i + j];
      const int q = s > 0 ? std::clamp(int(std::lround(v / double(s))), -127, 127) : 0;
      const double e = v - double(s) * q;
      err2 += e * e;
      q2 += double(q) * q;
      w2 += v * v;
      word |= uint32_t(uint8_t(int8_t(q))) << (8 * j);
    }
    words[i / 4] = word;
  }
  const double gamma = 2.0 * cols * std::ldexp(1.0, -24);
  const double c = (std::sqrt(err2) + gamma * (double(s) * std::sqrt(q2) + std::sqrt(w2))) * (1 + 1e-6);
  scale = s;
  bound[0] = std::nextafter(float(c), INFINITY);  // never below c
  bound[1] = std::nextafter(float(double(s) * std::sqrt(q2) * (1 + 1e-6)), INFINITY);
}

}  // namespace

Int8Rows quantize_rows_int8(std::span<const uint16_t> f16, uint32_t rows, uint32_t cols) {
  if (cols == 0 || cols % 4 != 0) throw std::invalid_argument(fmt::format("int8 rows: {} columns is not a multiple of 4", cols));
  if (f16.size() != uint64_t{rows} * cols)
    throw std::invalid_argument(fmt::format("int8 rows: {} values for {} x {}", f16.size(), rows, cols));
  Int8Rows out{std::vector<uint32_t>(uint64_t{rows} * cols / 4), std::vector<float>(rows), std::vector<float>(uint64_t{rows} * 2)};
  const uint32_t threads = std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (uint64_t r = t; r < rows; r += threads)
        quantize_row(f16.data() + r * cols, cols, out.words.data() + r * cols / 4, out.scale[r], out.bound.data() + 2 * r);
    });
  for (auto& th : pool) th.join();
  return out;
}

uint64_t greedy_head_bytes(const models::BitNetConfig& c) { return uint64_t{c.vocab_size} * (c.dim + 12); }

GreedyHead upload_greedy_head(rt::Context& ctx, const models::GgufFile& file, const models::BitNetConfig& config,
                              uint32_t rows_per_part) {
  const char* name = config.tied_output ? "token_embd.weight" : "output.weight";
  const auto bytes = file.tensor_data(name);
  if (bytes.size() != uint64_t{config.vocab_size} * config.dim * 2)
    throw std::runtime_error(fmt::format("{}: {} holds {} bytes, expected {} x {} F16", file.name(), name, bytes.size(),
                                         config.vocab_size, config.dim));
  // The F16 table as it lies in the mapped file (GGUF aligns tensor data); a copy only if it does not.
  std::vector<uint16_t> copy;
  std::span<const uint16_t> f16;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint16_t) == 0) {
    f16 = {reinterpret_cast<const uint16_t*>(bytes.data()), bytes.size() / 2};
  } else {
    copy.resize(bytes.size() / 2);
    std::memcpy(copy.data(), bytes.data(), bytes.size());
    f16 = copy;
  }
  // Quantized and uploaded a block of rows at a time: the host never holds the whole shadow.
  constexpr uint32_t kRowsAtOnce = 8192;
  GreedyHead h;
  std::vector<float> scale, bound;
  rt::UploadRing ring(ctx);
  const uint64_t row_words = config.dim / 4;
  for (uint32_t first = 0; first < config.vocab_size; first += rows_per_part) {
    const uint32_t n = std::min(rows_per_part, config.vocab_size - first);
    h.parts.emplace_back(ctx, n * row_words * 4, rt::BufferOptions{false, fmt::format("{} int8 [{}:{}]", name, first, first + n)});
    for (uint32_t r = 0; r < n; r += kRowsAtOnce) {
      const uint32_t m = std::min(kRowsAtOnce, n - r);
      const Int8Rows q = quantize_rows_int8(f16.subspan(uint64_t{first + r} * config.dim, uint64_t{m} * config.dim), m, config.dim);
      ring.upload(h.parts.back(), std::as_bytes(std::span(q.words)), r * row_words * 4);
      file.done_reading(bytes.subspan(uint64_t{first + r} * config.dim * 2, uint64_t{m} * config.dim * 2));
      scale.insert(scale.end(), q.scale.begin(), q.scale.end());
      bound.insert(bound.end(), q.bound.begin(), q.bound.end());
    }
  }
  h.scale = rt::Buffer(ctx, scale.size() * 4, {false, "greedy head scales"});
  ring.upload(h.scale, std::as_bytes(std::span(scale)));
  h.bound = rt::Buffer(ctx, bound.size() * 4, {false, "greedy head bounds"});
  ring.upload(h.bound, std::as_bytes(std::span(bound)));
  ring.finish();
  return h;
}

GreedyHead derive_greedy_head(rt::Context& ctx, const ops::PlannedPipeline& shadow, const SplitMatrix& table) {
  GreedyHead h;
  const uint64_t row_bytes = table.cols;  // one int8 a column
  std::vector<rt::Arg> args;
  for (size_t p = 0; p < table.parts.size(); ++p) args.push_back({"table" + std::to_string(p), table.parts[p]});
  for (uint32_t first = 0; first < table.rows; first += table.rows_per_part) {
    const uint32_t n = std::min(table.rows_per_part, table.rows - first);
    h.parts.emplace_back(ctx, n * row_bytes, rt::BufferOptions{false, fmt::format("lm-head shadow [{}:{}]", first, first + n)});
  }
  for (size_t p = 0; p < h.parts.size(); ++p) args.push_back({"shadow" + std::to_string(p), h.parts[p]});
  h.scale = rt::Buffer(ctx, uint64_t{table.rows} * 4, {false, "lm-head shadow scales"});
  h.bound = rt::Buffer(ctx, uint64_t{table.rows} * 8, {false, "lm-head shadow bounds"});
  args.push_back({"scale", h.scale});
  args.push_back({"bound", h.bound});
  rt::Graph g(ctx, {false, "lm-head shadow"});
  shadow.dispatch(g, args);
  g.submit_and_wait();
  return h;
}

}  // namespace bdsl::bitnet
