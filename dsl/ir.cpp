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
#define BDSL_CASE(name, spelling, kind) \
  case Fn::name:                        \
    return spelling;
    BDSL_FUNCTIONS(BDSL_CASE)
#undef BDSL_CASE
  }
  return "?";
}

FnKind fn_kind(Fn fn) {
  switch (fn) {
#define BDSL_CASE(name, spelling, kind) \
  case Fn::name:                        \
    return FnKind::kind;
    BDSL_FUNCTIONS(BDSL_CASE)
#undef BDSL_CASE
  }
  return FnKind::Atomic;  // not reached: the switch names every function
}

bool fn_is_pure(Fn fn) { return fn_kind(fn) == FnKind::Pure; }
bool fn_is_atomic(Fn fn) { return fn_kind(fn) == FnKind::Atomic; }
bool fn_is_subgroup(Fn fn) { return fn_kind(fn) == FnKind::Subgroup; }

}  // namespace bdsl::dsl
