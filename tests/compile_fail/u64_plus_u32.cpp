// Must not compile: 64-bit and 32-bit integers do not mix without an explicit cast
// hint: integers of different types or widths
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("u64_plus_u32");
  Expr<u64> a = 1ul;
  Expr<u32> b = 2u;
#ifdef BDSL_CONTROL
  auto c = a + cast<u64>(b);
  (void)c;
#else
  auto c = a + b;
  (void)c;
#endif
}
