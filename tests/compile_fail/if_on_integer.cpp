// Must not compile: if_() needs an Expr<boolean>, not a number
// hint: if_ takes a condition, not a number: compare first
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("if_on_integer");
  Expr<u32> a = 1u;
#ifdef BDSL_CONTROL
  if_(a != 0u, [] {});
#else
  if_(a, [] {});
#endif
}
