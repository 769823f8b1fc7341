// Must not compile: i32 and u32 do not mix without an explicit cast
// hint: i32 and u32 do not mix: convert one side
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("i32_plus_u32");
  Expr<i32> a = -1;
  Expr<u32> b = 2u;
#ifdef BDSL_CONTROL
  auto c = cast<u32>(a) + b;
  (void)c;
#else
  auto c = a + b;
  (void)c;
#endif
}
