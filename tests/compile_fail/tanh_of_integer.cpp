// Must not compile: tanh() is defined for floats only
// hint: tanh is defined for floats only: convert first
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("tanh_of_integer");
  Expr<i32> a = 2;
#ifdef BDSL_CONTROL
  auto c = tanh(cast<f32>(a));
  (void)c;
#else
  auto c = tanh(a);
  (void)c;
#endif
}
