// A dense row-major matrix: the activations of the reference model are [tokens, features].
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bdsl::golden {

template <class T>
struct Matrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<T> data;

  Matrix() = default;
  Matrix(std::size_t r, std::size_t c) : rows(r), cols(c), data(r * c) {}

  std::span<T> row(std::size_t r) { return {data.data() + r * cols, cols}; }
  std::span<const T> row(std::size_t r) const { return {data.data() + r * cols, cols}; }
  T& at(std::size_t r, std::size_t c) { return data[r * cols + c]; }
  const T& at(std::size_t r, std::size_t c) const { return data[r * cols + c]; }
};

using MatrixF = Matrix<float>;
using MatrixI = Matrix<int32_t>;

}  // namespace bdsl::golden
