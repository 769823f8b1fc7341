#include "models/formats/i2s.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace bdsl::models::i2s {

namespace {

// Where element j of a 128-element block lives: byte j % 32, shift 6 - 2 * (j / 32).
constexpr uint64_t byte_of(uint64_t j) { return j % kBlockBytes; }
constexpr unsigned shift_of(uint64_t j) { return 6 - 2 * static_cast<unsigned>(j / kBlockBytes); }

void check_size(std::span<const std::byte> packed, uint64_t n) {
  const uint64_t expected = packed_bytes(n);
  if (packed.size() != expected)
    throw I2sError(fmt::format("I2_S data for {} elements: expected {} bytes (n/4 + 32), found {}",
                               n, expected, packed.size()));
}

// Unpacks `blocks` whole blocks starting at block `first`; codes are already validated or
// checked here (a 3 is reported with its byte offset).
void unpack_blocks(std::span<const std::byte> packed, uint64_t first, uint64_t blocks,
                   std::span<int8_t> out) {
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t base = (first + b) * kBlockBytes;
    for (uint64_t j = 0; j < kBlockElements; ++j) {
      const auto byte = std::to_integer<unsigned>(packed[base + byte_of(j)]);
      const unsigned code = (byte >> shift_of(j)) & 3u;
      if (code == 3)
        throw I2sError(fmt::format("I2_S code 3 (unused) at byte {}", base + byte_of(j)));
      out[b * kBlockElements + j] = static_cast<int8_t>(static_cast<int>(code) - 1);
    }
  }
}

}  // namespace

uint64_t packed_bytes(uint64_t n) {
  if (n == 0 || n % kBlockElements != 0)
    throw I2sError(fmt::format("I2_S needs an element count that is a positive multiple of {}, "
                               "found {}", kBlockElements, n));
  return n / 4 + kScaleBytes;
}

void pack_into(std::span<const int8_t> ternary, float scale_value, std::span<std::byte> out) {
  const uint64_t n = ternary.size();
  if (out.size() != packed_bytes(n))
    throw I2sError(fmt::format("I2_S output for {} elements: expected {} bytes, found {}", n,
                               packed_bytes(n), out.size()));
  std::memset(out.data(), 0, out.size());
  for (uint64_t i = 0; i < n; ++i) {
    const int v = ternary[i];
    if (v < -1 || v > 1)
      throw I2sError(fmt::format("I2_S pack: element {} is {}, expected -1, 0 or +1", i, v));
    const uint64_t j = i % kBlockElements;
    const uint64_t at = (i / kBlockElements) * kBlockBytes + byte_of(j);
    out[at] |= static_cast<std::byte>((v + 1) << shift_of(j));
  }
  std::memcpy(out.data() + n / 4, &scale_value, sizeof scale_value);
}

std::vector<std::byte> pack(std::span<const int8_t> ternary, float scale_value) {
  std::vector<std::byte> out(packed_bytes(ternary.size()));
  pack_into(ternary, scale_value, out);
  return out;
}

Quantized quantize(std::span<const float> weights) {
  // quantize_i2_s: the scale is the largest magnitude (computed in double, stored as float).
  double max = 0.0;
  for (float w : weights) max = std::fmax(max, std::fabs(static_cast<double>(w)));
  Quantized q;
  q.scale = static_cast<float>(max);
  q.ternary.resize(weights.size());
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double w = weights[i];
    q.ternary[i] = std::fabs(w) < 1e-6 ? 0 : (w > 0 ? 1 : -1);
  }
  return q;
}

void unpack_into(std::span<const std::byte> packed, uint64_t n, std::span<int8_t> out) {
  check_size(packed, n);
  if (out.size() != n)
    throw I2sError(fmt::format("I2_S unpack: expected an output of {} elements, found {}", n, out.size()));
  unpack_blocks(packed, 0, n / kBlockElements, out);
}

std::vector<int8_t> unpack(std::span<const std::byte> packed, uint64_t n) {
  std::vector<int8_t> out(n);
  unpack_into(packed, n, out);
  return out;
}

void unpack_row(std::span<const std::byte> packed, uint64_t n, uint64_t row, uint64_t row_length,
                std::span<int8_t> out) {
  check_size(packed, n);
  if (row_length == 0 || row_length % kBlockElements != 0 || n % row_length != 0)
    throw I2sError(fmt::format("I2_S row length {} must be a positive multiple of {} dividing {}",
                               row_length, kBlockElements, n));
  if (row >= n / row_length)
    throw I2sError(fmt::format("I2_S row {} out of range ({} rows)", row, n / row_length));
  if (out.size() != row_length)
    throw I2sError(fmt::format("I2_S row output: expected {} elements, found {}", row_length, out.size()));
  const uint64_t blocks = row_length / kBlockElements;
  unpack_blocks(packed, row * blocks, blocks, out);
}

float scale(std::span<const std::byte> packed, uint64_t n) {
  check_size(packed, n);
  float s;
  std::memcpy(&s, packed.data() + n / 4, sizeof s);
  return s;
}

void set_scale(std::span<std::byte> packed, uint64_t n, float scale) {
  check_size(packed, n);
  std::memcpy(packed.data() + n / 4, &scale, sizeof scale);
}

void validate(std::span<const std::byte> packed, uint64_t n, std::string_view tensor_name) {
  try {
    check_size(packed, n);
  } catch (const I2sError& e) {
    throw I2sError(fmt::format("tensor \"{}\": {}", tensor_name, e.what()));
  }
  // A field holds a 3 when both its bits are set: (b & (b >> 1) & 0x55) != 0 per byte. Words
  // of 8 bytes first (the 2B model has ~0.5 GB of codes); the byte loop only pins the offset.
  constexpr uint64_t kLowBits = 0x5555555555555555ull;
  const uint64_t payload = n / 4;
  uint64_t i = 0;
  for (; i + 8 <= payload; i += 8) {
    uint64_t w;
    std::memcpy(&w, packed.data() + i, sizeof w);
    if ((w & (w >> 1) & kLowBits) != 0) break;
  }
  for (; i < payload; ++i) {
    const auto b = std::to_integer<unsigned>(packed[i]);
    if ((b & (b >> 1) & 0x55u) == 0) continue;
    unsigned field = 0;  // bits 7:6 hold element i % 32, 5:4 the next 32, ...
    while (((b >> (6 - 2 * field)) & 3u) != 3u) ++field;
    const uint64_t element = (i / kBlockBytes) * kBlockElements + field * kBlockBytes + i % kBlockBytes;
    throw I2sError(fmt::format("tensor \"{}\": invalid I2_S code 3 at byte {} (0x{:02x}), element "
                               "{}; expected codes 0, 1 or 2", tensor_name, i, b, element));
  }
}

std::vector<std::byte> reorder_rows(std::span<const std::byte> packed, uint64_t rows, uint64_t row_length,
                                    std::span<const uint32_t> from) {
  if (row_length == 0 || row_length % kBlockElements != 0)
    throw I2sError(fmt::format("I2_S rows of {} elements are not whole {}-element blocks", row_length, kBlockElements));
  const uint64_t n = rows * row_length;
  if (packed.size() != packed_bytes(n))
    throw I2sError(fmt::format("I2_S tensor of {} x {} needs {} bytes, found {}", rows, row_length, packed_bytes(n), packed.size()));
  if (from.size() != rows) throw I2sError(fmt::format("a row order of {} rows for a tensor of {}", from.size(), rows));
  const uint64_t row_bytes = row_length / 4;
  std::vector<std::byte> out(packed.begin(), packed.end());
  for (uint64_t r = 0; r < rows; ++r) {
    if (from[r] >= rows) throw I2sError(fmt::format("row order: row {} of a tensor of {}", from[r], rows));
    std::copy_n(packed.begin() + int64_t(from[r] * row_bytes), row_bytes, out.begin() + int64_t(r * row_bytes));
  }
  return out;
}

}  // namespace bdsl::models::i2s
