// Must not compile: a f32 value cannot be stored in a u32 buffer
// hint: store into a u32 element or variable: store a value of the element's type
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("store_wrong_type");
  auto y = k.buffer<u32>("y", Access::Write);
  Expr<f32> v = 1.0f;
#ifdef BDSL_CONTROL
  y[0u] = cast<u32>(v);
#else
  y[0u] = v;
#endif
}
