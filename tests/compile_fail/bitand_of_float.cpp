// Must not compile: & is defined for integers only
// hint: are defined for integers only: for a float's bits use bitcast<u32>
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("bitand_of_float");
  Expr<f32> a = 1.0f;
#ifdef BDSL_CONTROL
  auto c = bitcast<u32>(a) & 0xffu;
  (void)c;
#else
  auto c = a & a;
  (void)c;
#endif
}
