// Compile-time type tags of the DSL. `Expr<f32>` and `Expr<u32>` are different C++ types, so mixing
// them without an explicit cast<>() does not compile. Each tag maps to a runtime Type for the printer.
#pragma once
#include <cstdint>
#include <type_traits>

#include "dsl/type.h"

namespace bdsl::dsl {

struct boolean {};
struct i32 {};
struct u32 {};
struct f32 {};
struct f16 {};
// A signed byte: a buffer or shared element and a cooperative-matrix component, converted to and
// from i32 with cast<>(); no arithmetic of its own (needs shaderInt8, and 8-bit storage in buffers).
struct i8 {};
// 64-bit integers: values, buffer and shared elements (the device needs shaderInt64).
struct i64 {};
struct u64 {};
// 64-bit floats: values and shared elements (the device needs shaderFloat64). For the few steps
// that must be exact past f32 (ops/common/norm_scale.h), not for bulk arithmetic.
struct f64 {};
template <class S, int N>
struct vec {
  static_assert(N >= 2 && N <= 4, "vectors have 2, 3 or 4 lanes");
};

using vec2 = vec<f32, 2>;
using vec3 = vec<f32, 3>;
using vec4 = vec<f32, 4>;
using ivec2 = vec<i32, 2>;
using ivec4 = vec<i32, 4>;
using uvec2 = vec<u32, 2>;
using uvec3 = vec<u32, 3>;
using uvec4 = vec<u32, 4>;
using bvec4 = vec<boolean, 4>;

struct no_host_type {};  // f16 and vectors have no C++ literal spelling

template <class T>
struct traits;
template <>
struct traits<boolean> {
  static constexpr ScalarKind kind = ScalarKind::Bool;
  using host = bool;
};
template <>
struct traits<i32> {
  static constexpr ScalarKind kind = ScalarKind::I32;
  using host = int32_t;
};
template <>
struct traits<u32> {
  static constexpr ScalarKind kind = ScalarKind::U32;
  using host = uint32_t;
};
template <>
struct traits<f32> {
  static constexpr ScalarKind kind = ScalarKind::F32;
  using host = float;
};
template <>
struct traits<f16> {
  static constexpr ScalarKind kind = ScalarKind::F16;
  using host = no_host_type;
};
template <>
struct traits<i64> {
  static constexpr ScalarKind kind = ScalarKind::I64;
  using host = int64_t;
};
template <>
struct traits<u64> {
  static constexpr ScalarKind kind = ScalarKind::U64;
  using host = uint64_t;
};
template <>
struct traits<f64> {
  static constexpr ScalarKind kind = ScalarKind::F64;
  using host = double;
};
template <>
struct traits<i8> {
  static constexpr ScalarKind kind = ScalarKind::I8;
  using host = no_host_type;
};

template <class T>
struct scalar_of {
  using type = T;
  static constexpr int lanes = 1;
};
template <class S, int N>
struct scalar_of<vec<S, N>> {
  using type = S;
  static constexpr int lanes = N;
};

template <class T>
using scalar_t = typename scalar_of<T>::type;
template <class T>
inline constexpr int lanes_v = scalar_of<T>::lanes;
template <class T>
using host_t = std::conditional_t<lanes_v<T> == 1, typename traits<scalar_t<T>>::host, no_host_type>;

template <class T>
constexpr Type type_of() {
  return Type{traits<scalar_t<T>>::kind, static_cast<uint8_t>(lanes_v<T>)};
}

template <class T>
concept Scalar = lanes_v<T> == 1;
template <class T>
concept Float = std::is_same_v<scalar_t<T>, f32> || std::is_same_v<scalar_t<T>, f16> || std::is_same_v<scalar_t<T>, f64>;
template <class T>
concept Integer32 = std::is_same_v<scalar_t<T>, i32> || std::is_same_v<scalar_t<T>, u32>;
template <class T>
concept Integer64 = std::is_same_v<scalar_t<T>, i64> || std::is_same_v<scalar_t<T>, u64>;
template <class T>
concept Integer = Integer32<T> || Integer64<T>;
template <class T>
concept Signed = Float<T> || std::is_same_v<scalar_t<T>, i32> || std::is_same_v<scalar_t<T>, i64>;
template <class T>
concept Numeric = Float<T> || Integer<T>;
// What subgroup operations take: 32-bit and float types (64-bit integers would need
// shaderSubgroupExtendedTypes; f64 needs only shaderFloat64).
template <class T>
concept Numeric32 = Float<T> || Integer32<T>;
template <class T>
concept Bool = std::is_same_v<scalar_t<T>, boolean>;

}  // namespace bdsl::dsl
