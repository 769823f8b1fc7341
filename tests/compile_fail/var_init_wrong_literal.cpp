// Must not compile: an f32 variable starts from an f32 literal (0.0f), not an int
// hint: a stored literal must have the exact type of the element or variable
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("var_init_wrong_literal");
#ifdef BDSL_CONTROL
  auto acc = k.var<f32>("acc", 0.0f);
#else
  auto acc = k.var<f32>("acc", 0);
#endif
  acc += 1.0f;
}
