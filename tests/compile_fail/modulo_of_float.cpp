// Must not compile: % is defined for integers only
// hint: % is defined for integers only: for floats write x - y
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("modulo_of_float");
  Expr<f32> a = 2.0f;
#ifdef BDSL_CONTROL
  auto c = cast<u32>(a) % 3u;
  (void)c;
#else
  auto c = a % 3.0f;
  (void)c;
#endif
}
