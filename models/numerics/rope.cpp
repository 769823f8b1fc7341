#include "models/numerics/rope.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace bdsl::numerics {

namespace {

double rope_frequency(std::size_t i, std::size_t rope_dim, float base) {
  return std::pow(double(base), -2.0 * double(i) / double(rope_dim));
}

std::pair<float, float> rotation_at(int64_t pos, double frequency) {
  const double theta = double(pos) * frequency;
  return {static_cast<float>(std::cos(theta)), static_cast<float>(std::sin(theta))};
}

}  // namespace

std::pair<float, float> rope_rotation(int64_t pos, std::size_t i, std::size_t rope_dim, float base) {
  return rotation_at(pos, rope_frequency(i, rope_dim, base));
}

std::vector<float> rope_table(uint32_t positions, std::size_t rope_dim, float base) {
  if (rope_dim == 0 || rope_dim % 2 != 0) throw std::invalid_argument("rope_table: rope_dim " + std::to_string(rope_dim) + " must be even");
  const std::size_t half = rope_dim / 2;
  std::vector<double> frequency(half);  // the same values rope_rotation computes, once per pair
  for (std::size_t i = 0; i < half; ++i) frequency[i] = rope_frequency(i, rope_dim, base);
  std::vector<float> table(std::size_t{positions} * half * 2);
  for (uint32_t pos = 0; pos < positions; ++pos)
    for (std::size_t i = 0; i < half; ++i) {
      const auto [c, s] = rotation_at(pos, frequency[i]);
      table[(pos * half + i) * 2] = c;
      table[(pos * half + i) * 2 + 1] = s;
    }
  return table;
}

}  // namespace bdsl::numerics
