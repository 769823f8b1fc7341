// Must not compile: && needs booleans
// hint: take conditions, not numbers: compare first
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("logical_and_of_numbers");
  Expr<u32> a = 1u;
#ifdef BDSL_CONTROL
  auto c = (a > 0u) && (a < 4u);
  (void)c;
#else
  auto c = a && a;
  (void)c;
#endif
}
