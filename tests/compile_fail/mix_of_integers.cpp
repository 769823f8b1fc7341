// Must not compile: mix() blends floats only
// hint: mix blends floats only: use select
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("mix_of_integers");
  Expr<u32> a = 2u, b = 5u;
#ifdef BDSL_CONTROL
  auto c = mix(cast<f32>(a), cast<f32>(b), 0.5f);
  (void)c;
#else
  auto c = mix(a, b, 1u);
  (void)c;
#endif
}
