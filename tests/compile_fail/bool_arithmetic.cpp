// Must not compile: booleans have no arithmetic
// hint: booleans have no arithmetic: use select
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("bool_arithmetic");
  Expr<u32> a = 1u;
#ifdef BDSL_CONTROL
  auto c = select(a < 2u, 1u, 0u) + 1u;
  (void)c;
#else
  auto c = (a < 2u) + (a > 0u);
  (void)c;
#endif
}
