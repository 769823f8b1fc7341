// Push-constant values with their DSL types taken from the C++ types: `rt::push(n, 2.0f)`.
// The graph checks them against the kernel's declared push fields and lays them out itself.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "dsl/type.h"

namespace bdsl::rt {

template <class T>
constexpr Type push_type_of() {
  if constexpr (std::is_same_v<T, uint32_t>) return {ScalarKind::U32, 1};
  else if constexpr (std::is_same_v<T, int32_t>) return {ScalarKind::I32, 1};
  else if constexpr (std::is_same_v<T, float>) return {ScalarKind::F32, 1};
  else if constexpr (std::is_same_v<T, bool>) return {ScalarKind::Bool, 1};
  else static_assert(!sizeof(T), "push constants take uint32_t, int32_t, float or bool");
}

struct PushValue {
  Type type;
  std::array<std::byte, 4> bytes{};  // bool as a 32-bit 0 or 1, as GLSL stores it
  // A graph parameter (Graph::parameter) instead of a value: its word in that graph's parameters.
  const void* parameter_graph = nullptr;
  uint32_t parameter_word = 0;
};

struct PushConstants {
  std::vector<PushValue> values;
};

template <class T>
PushValue push_value(T value) {
  PushValue v{push_type_of<T>(), {}};
  if constexpr (std::is_same_v<T, bool>) {
    const uint32_t word = value ? 1u : 0u;
    std::memcpy(v.bytes.data(), &word, 4);
  } else {
    std::memcpy(v.bytes.data(), &value, 4);
  }
  return v;
}

// Values, or graph parameters (rt::Parameter, runtime/graph.h) where the kernel reads a param.
template <class... Args>
PushConstants push(const Args&... args) {
  return PushConstants{{push_value(args)...}};
}

}  // namespace bdsl::rt
