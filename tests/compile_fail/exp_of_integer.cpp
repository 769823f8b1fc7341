// Must not compile: exp() is defined for floats only
// hint: exp is defined for floats only: convert first
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("exp_of_integer");
  Expr<i32> a = 2;
#ifdef BDSL_CONTROL
  auto c = exp(cast<f32>(a));
  (void)c;
#else
  auto c = exp(a);
  (void)c;
#endif
}
