// Must not compile: an f32 matrix does not load from arrays of 32-bit words (integer and f16 ones do)
// hint: only integer and f16 matrices load from and store to arrays of 32-bit words
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("matrix_float_from_words");
  auto tile = k.shared<uvec4>("tile", 64);
#ifdef BDSL_CONTROL
  auto c = k.matrix<MatrixAcc<i32, 16, 16>>("c", 0);
#else
  auto c = k.matrix<MatrixAcc<f32, 16, 16>>("c", 0.0f);
#endif
  c.load(tile, 0u, 2u, MatrixLayout::RowMajor);
}
