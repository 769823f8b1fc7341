// Must not compile: int8 A and B do not multiply into a float accumulator
// hint: i8 A and B multiply into an i32 accumulator
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("matrix_int8_into_float");
#ifdef BDSL_CONTROL
  auto acc = k.matrix<MatrixAcc<i32, 16, 8>>("acc", 0);
#else
  auto acc = k.matrix<MatrixAcc<f32, 16, 8>>("acc", 0.0f);
#endif
  auto a = k.matrix<MatrixA<i8, 16, 32>>("a");
  auto b = k.matrix<MatrixB<i8, 32, 8>>("b");
  acc.mul_add(a, b);
}
