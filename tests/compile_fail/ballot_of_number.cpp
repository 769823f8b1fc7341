// Must not compile: subgroup_ballot() takes a condition, not a number
// hint: subgroup_ballot takes a condition, not a number
#include "dsl/dsl.h"
using namespace bdsl::dsl;
void f() {
  KernelBuilder k("ballot_of_number");
  Expr<u32> a = 2u;
#ifdef BDSL_CONTROL
  auto c = subgroup_ballot(a != 0u);
  (void)c;
#else
  auto c = subgroup_ballot(a);
  (void)c;
#endif
}
