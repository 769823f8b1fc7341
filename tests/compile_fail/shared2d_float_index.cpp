// Must not compile: a 2-D shared array is indexed by u32 or i32, not by a float
// hint: an index is a u32 or i32 value
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("shared2d_float_index", {16, 16, 1});
  auto tile = k.shared<f32>("tile", 16, 16);
  Expr<f32> x = 1.0f;
#ifdef BDSL_CONTROL
  tile[k.local_id().y()][cast<u32>(x)] = x;
#else
  tile[k.local_id().y()][x] = x;
#endif
}
