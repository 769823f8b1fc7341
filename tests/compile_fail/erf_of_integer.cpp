// Must not compile: erf() is defined for f32 only
// hint: erf is defined for f32 only: convert first
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("erf_of_integer");
  Expr<u32> a = 2u;
#ifdef BDSL_CONTROL
  auto c = erf(cast<f32>(a));
  (void)c;
#else
  auto c = erf(a);
  (void)c;
#endif
}
