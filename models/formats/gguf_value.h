// GGUF metadata values as the reader returns them: scalars, strings and (nested) arrays. Strings
// and scalar arrays are views into the parsed bytes (the memory map), so a GgufValue is valid only
// while the GgufFile that produced it is alive.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bdsl::models {

// Numbering as in the GGUF specification.
enum class GgufValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// "uint32", "string", "array" ...; "type#N" for an id outside the specification.
std::string_view gguf_value_type_name(GgufValueType type);
// Bytes of one scalar element (0 for STRING and ARRAY, whose sizes vary).
uint64_t gguf_scalar_size(GgufValueType type);
bool gguf_is_integer(GgufValueType type);

// Every error from reading a GGUF file or its metadata; the message names the file (or key), the
// field, the byte offset and what was expected versus found.
struct GgufError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The C++ type that holds each GGUF scalar type: uint8_t, int8_t, ..., float, double, bool and
// std::string_view for STRING. Used by the typed accessors.
template <class T> constexpr bool kIsGgufScalar =
    std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t> || std::is_same_v<T, uint16_t> ||
    std::is_same_v<T, int16_t> || std::is_same_v<T, uint32_t> || std::is_same_v<T, int32_t> ||
    std::is_same_v<T, uint64_t> || std::is_same_v<T, int64_t> || std::is_same_v<T, float> ||
    std::is_same_v<T, double> || std::is_same_v<T, bool> || std::is_same_v<T, std::string_view>;
template <class T> GgufValueType gguf_type_of();  // e.g. gguf_type_of<uint32_t>() == UINT32

class GgufValue;

// An array: scalar elements are kept as the raw little-endian bytes of the file (so a huge array
// costs no allocation), strings as views, nested arrays as values.
class GgufArray {
 public:
  GgufValueType element_type() const noexcept { return element_type_; }
  uint64_t size() const noexcept { return count_; }
  GgufValue at(uint64_t index) const;  // throws GgufError when index >= size()

  // The elements as T; throws GgufError (expected vs found element type) unless T matches exactly.
  template <class T> std::vector<T> to_vector() const;
  // STRING arrays only (throws otherwise); views into the file.
  std::span<const std::string_view> strings() const;

 private:
  friend class GgufParser;
  GgufValueType element_type_ = GgufValueType::UINT8;
  uint64_t count_ = 0;
  std::span<const std::byte> raw_;           // scalar elements
  std::vector<std::string_view> strings_;    // STRING elements
  std::vector<GgufValue> arrays_;            // ARRAY elements
};

class GgufValue {
 public:
  GgufValue() = default;
  GgufValueType type() const noexcept { return type_; }

  // Exact-type access: throws GgufError "expected <T>, found <type>" on a mismatch.
  template <class T> T as() const;
  const GgufArray& as_array() const;

  // Any integer type whose value fits (writers disagree on u32 vs i32 for counts); nullopt
  // when the value is not an integer or does not fit.
  std::optional<uint64_t> to_u64() const;
  std::optional<int64_t> to_i64() const;
  // FLOAT32 or FLOAT64 (or an integer) as double; nullopt otherwise.
  std::optional<double> to_f64() const;

  // Human-readable rendering for `inspect`: arrays longer than max_items show the first items and
  // the count, strings are quoted. `json` escapes strings and renders arrays as JSON arrays.
  std::string to_string(uint64_t max_items = 8, bool json = false) const;

 private:
  friend class GgufParser;
  friend class GgufArray;
  GgufValueType type_ = GgufValueType::UINT8;
  uint64_t bits_ = 0;  // scalar payload (little-endian bits, zero-extended)
  std::string_view string_;
  std::shared_ptr<const GgufArray> array_;
};

}  // namespace bdsl::models
