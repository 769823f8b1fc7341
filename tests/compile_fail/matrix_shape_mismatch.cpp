// Must not compile: a 16x32 A times a 16x8 B (A's columns are not B's rows) into a 16x8 accumulator
// hint: the shapes do not fit: a must be Rows x K and b K x Cols
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("matrix_shape_mismatch");
  auto acc = k.matrix<MatrixAcc<i32, 16, 8>>("acc", 0);
  auto a = k.matrix<MatrixA<i8, 16, 32>>("a");
#ifdef BDSL_CONTROL
  auto b = k.matrix<MatrixB<i8, 32, 8>>("b");
#else
  auto b = k.matrix<MatrixB<i8, 16, 8>>("b");
#endif
  acc.mul_add(a, b);
}
