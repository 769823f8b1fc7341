// Runtime description of a DSL value type: a scalar kind and a lane count (1 = scalar, 2..4 = vector).
// Compile-time type tags (f32, u32, vec<f32,4>, ...) map onto it through type_of<T>().
#pragma once
#include <cstdint>
#include <string>

namespace bdsl {

// I8: storage and matrices only; I64/U64 need shaderInt64, F64 shaderFloat64.
enum class ScalarKind : uint8_t { Bool, I32, U32, F32, F16, I8, I64, U64, F64 };

struct Type {
  ScalarKind kind = ScalarKind::F32;
  uint8_t lanes = 1;

  bool is_vector() const { return lanes > 1; }
  bool is_float() const { return kind == ScalarKind::F32 || kind == ScalarKind::F16 || kind == ScalarKind::F64; }
  bool is_int() const { return kind == ScalarKind::I32 || kind == ScalarKind::U32 || is_64bit(); }
  bool is_64bit() const { return kind == ScalarKind::I64 || kind == ScalarKind::U64; }
  bool is_bool() const { return kind == ScalarKind::Bool; }
  Type element() const { return {kind, 1}; }
  // Size in a std430 buffer or push-constant block (bool is stored as a 32-bit word).
  uint32_t scalar_bytes() const { return kind == ScalarKind::I8 ? 1u : kind == ScalarKind::F16 ? 2u : is_64bit() || kind == ScalarKind::F64 ? 8u : 4u; }
  uint32_t bytes() const { return scalar_bytes() * lanes; }
  uint32_t align() const { return scalar_bytes() * (lanes == 3 ? 4u : lanes); }  // std430: a vec3 aligns as a vec4
  friend bool operator==(Type, Type) = default;
};

std::string glsl_name(Type t);   // "float", "uvec4", "float16_t", ...
std::string to_string(Type t);   // "f32", "vec4<u32>", ...

}  // namespace bdsl
