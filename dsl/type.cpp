#include "dsl/type.h"

namespace bdsl {

std::string glsl_name(Type t) {
  static const char* scalar[] = {"bool", "int", "uint", "float", "float16_t", "int8_t", "int64_t", "uint64_t", "double"};
  static const char* prefix[] = {"bvec", "ivec", "uvec", "vec", "f16vec", "i8vec", "i64vec", "u64vec", "dvec"};
  const auto k = static_cast<int>(t.kind);
  if (t.lanes == 1) return scalar[k];
  return prefix[k] + std::to_string(t.lanes);
}

std::string to_string(Type t) {
  static const char* scalar[] = {"bool", "i32", "u32", "f32", "f16", "i8", "i64", "u64", "f64"};
  const std::string s = scalar[static_cast<int>(t.kind)];
  if (t.lanes == 1) return s;
  return "vec" + std::to_string(t.lanes) + "<" + s + ">";
}

}  // namespace bdsl
