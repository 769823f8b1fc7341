// Must not compile: atomics other than atomic_add work on u32/i32 only
// hint: atomics other than atomic_add work on u32/i32 elements only
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("atomic_on_float");
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto z = k.buffer<u32>("z", Access::ReadWrite);
#ifdef BDSL_CONTROL
  atomic_min(z[0u], 1u);
  (void)y;
#else
  atomic_min(y[0u], 1.0f);
#endif
}
