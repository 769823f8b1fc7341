// Must not compile: cast<> keeps the lane count
// hint: cast<> keeps the lane count: take a lane first
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("cast_changes_lanes");
  auto a = make_vec<f32>(1.0f, 2.0f);
#ifdef BDSL_CONTROL
  auto c = cast<uvec2>(a);
  (void)c;
#else
  auto c = cast<u32>(a);
  (void)c;
#endif
}
