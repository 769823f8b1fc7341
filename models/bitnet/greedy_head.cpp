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

// `w`: room for `cols` floats (the row widened once).
void quantize_row(const uint16_t* f16, uint32_t cols, uint32_t* words, float& scale, float* bound, std::span<float> w) {
  numerics::f16_to_f32({f16, cols}, w);
  float amax = 0;
  for (uint32_t i = 0; i < cols; ++i) amax = std::max(amax, std::abs(w[i]));
  const float s = float(double(amax) / 127.0);
  const double ds = s;
  const double inverse = s > 0 ? 1.0 / ds : 0.0;
  // lround(v / s), half away from zero. The quotient x of an F16 value by a float never lies
  // within 2^-25 of a half-integer unless it is one (v = (q + 1/2) s exactly, as with a power of
  // two s), so |v| * (1 / s) (within 2^-45 of x) rounds as x does, except at those ties, which
  // the division settles.
  auto code = [&](double v) {
    const double a = std::abs(v);
    const double y = std::min(127.0, a * inverse) + 0.5;  // a NaN row: 127, never a cast of NaN
    int m = int(y);
    if (y - m < 1e-6 && s > 0) m = int(std::min(127.0, a / ds) + 0.5);  // on or near a tie
    return v < 0 ? -m : m;
  };
  // Four sums each (one per byte of a word), in registers: independent chains, so the loop is
  // not bound by the latency of one long sum.
  double e0 = 0, e1 = 0, e2 = 0, e3 = 0, n0 = 0, n1 = 0, n2 = 0, n3 = 0;
  int64_t q2 = 0;
  for (uint32_t i = 0; i < cols; i += 4) {
    const double v0 = w[i], v1 = w[i + 1], v2 = w[i + 2], v3 = w[i + 3];
    const int q0 = code(v0), q1 = code(v1), q2_ = code(v2), q3 = code(v3);
    const double d0 = v0 - ds * q0, d1 = v1 - ds * q1, d2 = v2 - ds * q2_, d3 = v3 - ds * q3;
    e0 += d0 * d0, e1 += d1 * d1, e2 += d2 * d2, e3 += d3 * d3;
    n0 += v0 * v0, n1 += v1 * v1, n2 += v2 * v2, n3 += v3 * v3;
    q2 += (q0 * q0 + q1 * q1) + (q2_ * q2_ + q3 * q3);
    words[i / 4] = uint32_t(uint8_t(int8_t(q0))) | uint32_t(uint8_t(int8_t(q1))) << 8 | uint32_t(uint8_t(int8_t(q2_))) << 16 |
                   uint32_t(uint8_t(int8_t(q3))) << 24;
  }
  const double err = std::sqrt((e0 + e1) + (e2 + e3));
  const double norm = std::sqrt((n0 + n1) + (n2 + n3));
  const double gamma = 2.0 * cols * std::ldexp(1.0, -24);
  const double c = (err + gamma * (ds * std::sqrt(double(q2)) + norm)) * (1 + 1e-6);
  scale = s;
  bound[0] = std::nextafter(float(c), INFINITY);  // never below c
  bound[1] = std::nextafter(float(ds * std::sqrt(double(q2)) * (1 + 1e-6)), INFINITY);
}

}  // namespace

void quantize_rows_int8(std::span<const uint16_t> f16, uint32_t rows, uint32_t cols, std::span<uint32_t> words,
                        std::span<float> scale, std::span<float> bound) {
  if (cols == 0 || cols % 4 != 0) throw std::invalid_argument(fmt::format("int8 rows: {} columns is not a multiple of 4", cols));
  if (f16.size() != uint64_t{rows} * cols)
    throw std::invalid_argument(fmt::format("int8 rows: {} values for {} x {}", f16.size(), rows, cols));
  if (words.size() < uint64_t{rows} * cols / 4 || scale.size() < rows || bound.size() < uint64_t{rows} * 2)
    throw std::invalid_argument(fmt::format("int8 rows: no room for {} x {}", rows, cols));
  const uint32_t threads = std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<float> w(cols);
      for (uint64_t r = t; r < rows; r += threads)
        quantize_row(f16.data() + r * cols, cols, words.data() + r * cols / 4, scale[r], bound.data() + 2 * r, w);
    });
  for (auto& th : pool) th.join();
}

Int8Rows quantize_rows_int8(std::span<const uint16_t> f16, uint32_t rows, uint32_t cols) {
  Int8Rows out{std::vector<uint32_t>(uint64_t{rows} * cols / 4), std::vector<float>(rows), std::vector<float>(uint64_t{rows} * 2)};
  quantize_rows_int8(f16, rows, cols, out.words, out.scale, out.bound);
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
  // Quantized a block of rows at a time: the host never holds the whole shadow. On a CPU device
  // the parts are memory the host writes in place; elsewhere each block is streamed up.
  constexpr uint32_t kRowsAtOnce = 8192;
  const bool in_place = ctx.info().type == rt::DeviceType::Cpu;
  GreedyHead h;
  std::vector<float> scale(config.vocab_size), bound(uint64_t{config.vocab_size} * 2);
  std::vector<uint32_t> block;  // streamed: one block's words
  rt::UploadRing ring(ctx);
  const uint64_t row_words = config.dim / 4;
  for (uint32_t first = 0; first < config.vocab_size; first += rows_per_part) {
    const uint32_t n = std::min(rows_per_part, config.vocab_size - first);
    h.parts.emplace_back(ctx, n * row_words * 4,
                         rt::BufferOptions{.host_visible = in_place, .name = fmt::format("{} int8 [{}:{}]", name, first, first + n),
                                           .gpu_reads_often = in_place});
    const auto part = in_place ? h.parts.back().host_words() : std::span<uint32_t>{};
    for (uint32_t r = 0; r < n; r += kRowsAtOnce) {
      const uint32_t m = std::min(kRowsAtOnce, n - r);
      const uint64_t at = first + r;
      if (!in_place) block.resize(m * row_words);
      const auto words = in_place ? part.subspan(r * row_words, m * row_words) : std::span<uint32_t>(block);
      quantize_rows_int8(f16.subspan(at * config.dim, uint64_t{m} * config.dim), m, config.dim, words,
                         std::span(scale).subspan(at, m), std::span(bound).subspan(2 * at, 2 * m));
      if (!in_place) ring.upload(h.parts.back(), std::as_bytes(words), r * row_words * 4);
      file.done_reading(bytes.subspan(at * config.dim * 2, uint64_t{m} * config.dim * 2));
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
