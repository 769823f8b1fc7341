// Must not compile: adding Expr<f32> and Expr<u32> needs an explicit cast
// hint: f32 and u32 do not mix: convert one side
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("float_plus_uint");
  Expr<f32> a = 1.0f;
  Expr<u32> b = 2u;
#ifdef BDSL_CONTROL
  auto c = a + cast<f32>(b);
  (void)c;
#else
  auto c = a + b;
  (void)c;
#endif
}
