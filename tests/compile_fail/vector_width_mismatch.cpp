// Must not compile: vec4 + vec2 is not defined
// hint: vectors of different widths do not mix: make the widths equal
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("vector_width_mismatch");
  auto a = make_vec<f32>(1.0f, 2.0f, 3.0f, 4.0f);
  auto b = make_vec<f32>(1.0f, 2.0f);
#ifdef BDSL_CONTROL
  auto c = a + make_vec<f32>(b.x(), b.y(), 0.0f, 0.0f);
  (void)c;
#else
  auto c = a + b;
  (void)c;
#endif
}
