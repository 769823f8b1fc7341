// Must not compile: select()'s first operand is a condition, not a number
// hint: first operand must be a condition, not a number: compare first
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("select_on_number");
  Expr<u32> a = 2u;
#ifdef BDSL_CONTROL
  auto c = select(a != 0u, 1.0f, 0.0f);
  (void)c;
#else
  auto c = select(a, 1.0f, 0.0f);
  (void)c;
#endif
}
