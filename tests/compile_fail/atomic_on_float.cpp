// Must not compile: atomics work on u32/i32 only
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("atomic_on_float");
  auto y = k.buffer<f32>("y", Access::ReadWrite);
  auto z = k.buffer<u32>("z", Access::ReadWrite);
#ifdef BDSL_CONTROL
  atomic_add(z[0u], 1u);
  (void)y;
#else
  atomic_add(y[0u], 1.0f);
#endif
}
