#include "models/formats/gguf_value.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "models/formats/json_escape.h"

namespace bdsl::models {

static_assert(std::endian::native == std::endian::little,
              "GGUF v3 files are little-endian; this reader views them in place");

std::string_view gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8: return "uint8";
    case GgufValueType::INT8: return "int8";
    case GgufValueType::UINT16: return "uint16";
    case GgufValueType::INT16: return "int16";
    case GgufValueType::UINT32: return "uint32";
    case GgufValueType::INT32: return "int32";
    case GgufValueType::FLOAT32: return "float32";
    case GgufValueType::BOOL: return "bool";
    case GgufValueType::STRING: return "string";
    case GgufValueType::ARRAY: return "array";
    case GgufValueType::UINT64: return "uint64";
    case GgufValueType::INT64: return "int64";
    case GgufValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

uint64_t gguf_scalar_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::BOOL: return 1;
    case GgufValueType::UINT16: case GgufValueType::INT16: return 2;
    case GgufValueType::UINT32: case GgufValueType::INT32: case GgufValueType::FLOAT32: return 4;
    case GgufValueType::UINT64: case GgufValueType::INT64: case GgufValueType::FLOAT64: return 8;
    default: return 0;
  }
}

bool gguf_is_integer(GgufValueType type) {
  switch (type) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::UINT16:
    case GgufValueType::INT16: case GgufValueType::UINT32: case GgufValueType::INT32:
    case GgufValueType::UINT64: case GgufValueType::INT64: return true;
    default: return false;
  }
}

template <class T> GgufValueType gguf_type_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return GgufValueType::UINT8;
  else if constexpr (std::is_same_v<T, int8_t>) return GgufValueType::INT8;
  else if constexpr (std::is_same_v<T, uint16_t>) return GgufValueType::UINT16;
  else if constexpr (std::is_same_v<T, int16_t>) return GgufValueType::INT16;
  else if constexpr (std::is_same_v<T, uint32_t>) return GgufValueType::UINT32;
  else if constexpr (std::is_same_v<T, int32_t>) return GgufValueType::INT32;
  else if constexpr (std::is_same_v<T, uint64_t>) return GgufValueType::UINT64;
  else if constexpr (std::is_same_v<T, int64_t>) return GgufValueType::INT64;
  else if constexpr (std::is_same_v<T, float>) return GgufValueType::FLOAT32;
  else if constexpr (std::is_same_v<T, double>) return GgufValueType::FLOAT64;
  else if constexpr (std::is_same_v<T, bool>) return GgufValueType::BOOL;
  else return GgufValueType::STRING;
}

namespace {

[[noreturn]] void type_mismatch(std::string_view what, GgufValueType expected, GgufValueType found) {
  throw GgufError(fmt::format("{}: expected {}, found {}", what, gguf_value_type_name(expected),
                              gguf_value_type_name(found)));
}

template <class T> T read_scalar(const std::byte* p) {
  if constexpr (std::is_same_v<T, bool>) {
    return std::to_integer<uint8_t>(*p) != 0;
  } else {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
}

}  // namespace

// ---- GgufArray ----

GgufValue GgufArray::at(uint64_t index) const {
  if (index >= count_)
    throw GgufError(fmt::format("array index {} out of range (size {})", index, count_));
  if (element_type_ == GgufValueType::STRING) {
    GgufValue v;
    v.type_ = GgufValueType::STRING;
    v.string_ = strings_[index];
    return v;
  }
  if (element_type_ == GgufValueType::ARRAY) return arrays_[index];
  const uint64_t size = gguf_scalar_size(element_type_);
  GgufValue v;
  v.type_ = element_type_;
  std::memcpy(&v.bits_, raw_.data() + index * size, size);
  return v;
}

std::span<const std::string_view> GgufArray::strings() const {
  if (element_type_ != GgufValueType::STRING)
    type_mismatch("array elements", GgufValueType::STRING, element_type_);
  return strings_;
}

template <class T> std::vector<T> GgufArray::to_vector() const {
  if (element_type_ != gguf_type_of<T>())
    type_mismatch("array elements", gguf_type_of<T>(), element_type_);
  if constexpr (std::is_same_v<T, std::string_view>) {
    return strings_;
  } else {
    std::vector<T> out(count_);
    for (uint64_t i = 0; i < count_; ++i) out[i] = read_scalar<T>(raw_.data() + i * sizeof(T));
    return out;
  }
}

// ---- GgufValue ----

template <class T> T GgufValue::as() const {
  if (type_ != gguf_type_of<T>()) type_mismatch("value", gguf_type_of<T>(), type_);
  if constexpr (std::is_same_v<T, std::string_view>) {
    return string_;
  } else {
    return read_scalar<T>(reinterpret_cast<const std::byte*>(&bits_));
  }
}

const GgufArray& GgufValue::as_array() const {
  if (type_ != GgufValueType::ARRAY) type_mismatch("value", GgufValueType::ARRAY, type_);
  return *array_;
}

std::optional<int64_t> GgufValue::to_i64() const {
  switch (type_) {
    case GgufValueType::INT8: return as<int8_t>();
    case GgufValueType::INT16: return as<int16_t>();
    case GgufValueType::INT32: return as<int32_t>();
    case GgufValueType::INT64: return as<int64_t>();
    case GgufValueType::UINT8: case GgufValueType::UINT16: case GgufValueType::UINT32:
      return static_cast<int64_t>(bits_);
    case GgufValueType::UINT64:
      if (bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(bits_);
    default: return std::nullopt;
  }
}

std::optional<uint64_t> GgufValue::to_u64() const {
  if (type_ == GgufValueType::UINT64) return bits_;
  const auto v = to_i64();
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

std::optional<double> GgufValue::to_f64() const {
  if (type_ == GgufValueType::FLOAT32) return as<float>();
  if (type_ == GgufValueType::FLOAT64) return as<double>();
  if (type_ == GgufValueType::UINT64) return static_cast<double>(bits_);
  if (const auto v = to_i64()) return static_cast<double>(*v);
  return std::nullopt;
}

namespace {

// Shortest text that reads back as the same float or double (1e-05, not 9.99999974e-06).
template <class F> std::string float_text(F v, bool json) {
  if (json && !std::isfinite(v)) return "null";  // JSON has no NaN or infinity
  return fmt::format("{}", v);
}

}  // namespace

std::string GgufValue::to_string(uint64_t max_items, bool json) const {
  switch (type_) {
    case GgufValueType::STRING: return quote_json_string(string_);
    case GgufValueType::BOOL: return as<bool>() ? "true" : "false";
    case GgufValueType::FLOAT32: return float_text(as<float>(), json);
    case GgufValueType::FLOAT64: return float_text(as<double>(), json);
    case GgufValueType::UINT64: return fmt::format("{}", bits_);
    case GgufValueType::ARRAY: break;
    default: return fmt::format("{}", to_i64().value_or(0));
  }
  const GgufArray& a = *array_;
  const uint64_t shown = std::min(a.size(), max_items);
  std::string out = "[";
  for (uint64_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    out += a.at(i).to_string(max_items, json);
  }
  if (shown < a.size()) {
    // JSON readers get a count they can parse; people get the gguf-dump style summary.
    out += json ? fmt::format("{}{{\"omitted\": {}}}", shown ? ", " : "", a.size() - shown)
                : fmt::format("{}... ({} items)", shown ? ", " : "", a.size());
  }
  return out + "]";
}

#define BDSL_GGUF_SCALAR_TYPES(X) \
  X(uint8_t) X(int8_t) X(uint16_t) X(int16_t) X(uint32_t) X(int32_t) X(uint64_t) X(int64_t) \
  X(float) X(double) X(bool) X(std::string_view)
#define BDSL_INSTANTIATE(T)                                   \
  template GgufValueType gguf_type_of<T>();                   \
  template T GgufValue::as<T>() const;                        \
  template std::vector<T> GgufArray::to_vector<T>() const;
BDSL_GGUF_SCALAR_TYPES(BDSL_INSTANTIATE)
#undef BDSL_INSTANTIATE

}  // namespace bdsl::models
