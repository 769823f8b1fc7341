// Must not compile: only integer matrices load from arrays of 32-bit words
// hint: only integer matrices load from and store to arrays of 32-bit words
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("matrix_float_from_words");
  auto tile = k.shared<uvec4>("tile", 64);
#ifdef BDSL_CONTROL
  auto a = k.matrix<MatrixA<i8, 16, 32>>("a");
#else
  auto a = k.matrix<MatrixA<f16, 16, 16>>("a");
#endif
  a.load(tile, 0u, 2u, MatrixLayout::RowMajor);
}
