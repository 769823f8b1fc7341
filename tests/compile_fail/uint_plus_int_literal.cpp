// Must not compile: an int literal is not a u32: write 1u
// hint: a literal must have the operand's exact type: 1u for u32, 1 for i32
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("uint_plus_int_literal");
  Expr<u32> a = 2u;
#ifdef BDSL_CONTROL
  auto c = a + 1u;
  (void)c;
#else
  auto c = a + 1;
  (void)c;
#endif
}
