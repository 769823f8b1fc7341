// Must not compile: while_()'s condition must give an Expr<boolean>, not a number
// hint: condition must give a condition, not a number: compare first
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("while_on_number");
  auto n = k.var<u32>("n", 4u);
#ifdef BDSL_CONTROL
  while_([&] { return n != 0u; }, [&] { n -= 1u; });
#else
  while_([&] { return n; }, [&] { n -= 1u; });
#endif
}
