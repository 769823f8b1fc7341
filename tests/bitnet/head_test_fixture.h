// What the LM head tests share: random F16 tables (random x is matrix_test.h's random_floats),
// and the fixture that puts a table and its int8 shadow on the device in the split's parts.
#pragma once
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "device_test.h"
#include "matrix_test.h"
#include "models/bitnet/greedy_head.h"
#include "models/numerics/half_float.h"
#include "ops/head/lm_head.h"

namespace bdsl::test {

inline std::vector<uint16_t> random_table(uint32_t rows, uint32_t cols, uint32_t seed, float sd = 0.05f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<uint16_t> t(size_t(rows) * cols);
  for (uint16_t& h : t) h = numerics::f32_to_f16(d(rng));
  return t;
}

// The F16 table and its int8 shadow on the device in the split's parts (as the model uploads them).
class HeadTest : public DeviceTest {
 protected:
  std::pair<std::vector<rt::Buffer>, std::vector<rt::Buffer>> table_parts(const std::vector<uint16_t>& table,
                                                                           const bitnet::Int8Rows& q, const ops::LmHeadSplit& split,
                                                                           uint32_t vocab, uint32_t dim) {
    std::vector<rt::Buffer> f16_parts, int8_parts;
    for (uint32_t p = 0; p < split.parts; ++p) {
      const size_t first = size_t(p) * split.rows_per_part, n = split.rows_in_part(p, vocab);
      f16_parts.push_back(buffer_of(std::vector<uint16_t>(table.begin() + first * dim, table.begin() + (first + n) * dim), "f16"));
      int8_parts.push_back(buffer_of(std::vector<uint32_t>(q.words.begin() + first * dim / 4, q.words.begin() + (first + n) * dim / 4), "int8"));
    }
    return {std::move(f16_parts), std::move(int8_parts)};
  }
};

}  // namespace bdsl::test
