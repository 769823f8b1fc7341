// Runtime description of a DSL value type: a scalar kind and a lane count (1 = scalar, 2..4 = vector).
// Compile-time type tags (f32, u32, vec<f32,4>, ...) map onto it through type_of<T>().
#pragma once
#include <cstdint>
#include <string>

namespace bdsl {

enum class ScalarKind : uint8_t { Bool, I32, U32, F32, F16, I8 };  // I8: storage and matrices only

struct Type {
  ScalarKind kind = ScalarKind::F32;
  uint8_t lanes = 1;

  bool is_vector() const { return lanes > 1; }
  bool is_float() const { return kind == ScalarKind::F32 || kind == ScalarKind::F16; }
  bool is_int() const { return kind == ScalarKind::I32 || kind == ScalarKind::U32; }
  bool is_bool() const { return kind == ScalarKind::Bool; }
  Type element() const { return {kind, 1}; }
  // Size in a std430 buffer or push-constant block (bool is stored as a 32-bit word).
  uint32_t bytes() const { return (kind == ScalarKind::I8 ? 1u : kind == ScalarKind::F16 ? 2u : 4u) * lanes; }
  uint32_t align() const { return bytes() == 12 ? 16 : bytes(); }
  friend bool operator==(Type, Type) = default;
};

std::string glsl_name(Type t);   // "float", "uvec4", "float16_t", ...
std::string to_string(Type t);   // "f32", "vec4<u32>", ...

}  // namespace bdsl
