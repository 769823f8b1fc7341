#include "dsl/ir.h"

namespace bdsl::dsl {

const char* op_name(Op op) {
  switch (op) {
#define BDSL_CASE(name, spelling, arity) \
  case Op::name:                         \
    return #name;
    BDSL_NODE_OPS(BDSL_CASE)
#undef BDSL_CASE
  }
  return "?";
}

const char* op_spelling(Op op) {
  switch (op) {
#define BDSL_CASE(name, spelling, arity) \
  case Op::name:                         \
    return spelling;
    BDSL_NODE_OPS(BDSL_CASE)
#undef BDSL_CASE
  }
  return "?";
}

const char* fn_spelling(Fn fn) {
  switch (fn) {
#define BDSL_CASE(name, spelling, pure) \
  case Fn::name:                        \
    return spelling;
    BDSL_FUNCTIONS(BDSL_CASE)
#undef BDSL_CASE
  }
  return "?";
}

bool fn_is_pure(Fn fn) {
  switch (fn) {
#define BDSL_CASE(name, spelling, pure) \
  case Fn::name:                        \
    return pure;
    BDSL_FUNCTIONS(BDSL_CASE)
#undef BDSL_CASE
  }
  return false;
}

bool fn_is_atomic(Fn fn) { return fn >= Fn::AtomicAdd && fn <= Fn::AtomicCompSwap; }
bool fn_is_subgroup(Fn fn) { return fn >= Fn::SubgroupAdd && fn <= Fn::SubgroupElect; }

}  // namespace bdsl::dsl
