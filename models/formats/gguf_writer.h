// GGUF v3 writer, for synthetic models and tests. Metadata is encoded as it is added; tensor data
// is either copied in (small tensors) or produced by a callback at write time straight into the
// output (a memory map of the file), so a 1.2 GB model is never held twice.
//
// Layout written (as ggml/gguf-py do): header, metadata, tensor infos, zero padding up to the
// alignment, then each tensor's data at an offset (relative to the data section) that is a
// multiple of the alignment, zero padded between tensors and after the last one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/formats/ggml_type.h"
#include "models/formats/gguf_value.h"

namespace bdsl::models {

// One metadata value, encoded on construction: its type tag and little-endian payload.
class GgufOutValue {
 public:
  static GgufOutValue u8(uint8_t v);
  static GgufOutValue i8(int8_t v);
  static GgufOutValue u16(uint16_t v);
  static GgufOutValue i16(int16_t v);
  static GgufOutValue u32(uint32_t v);
  static GgufOutValue i32(int32_t v);
  static GgufOutValue u64(uint64_t v);
  static GgufOutValue i64(int64_t v);
  static GgufOutValue f32(float v);
  static GgufOutValue f64(double v);
  static GgufOutValue boolean(bool v);
  static GgufOutValue string(std::string_view v);
  // Array of a scalar type T (uint8_t ... double, bool).
  template <class T> static GgufOutValue array(std::span<const T> values);
  static GgufOutValue string_array(std::span<const std::string> values);
  static GgufOutValue string_array(std::span<const std::string_view> values);
  // Array whose elements are values of one type (e.g. arrays, for nested arrays). Throws
  // std::invalid_argument when the items' types differ.
  static GgufOutValue array_of(std::span<const GgufOutValue> items);

  GgufValueType type() const noexcept { return type_; }
  std::span<const std::byte> payload() const noexcept { return payload_; }

 private:
  GgufOutValue(GgufValueType type, std::vector<std::byte> payload);
  GgufValueType type_;
  std::vector<std::byte> payload_;  // without the type tag
};

class GgufWriter {
 public:
  // Fills a tensor's bytes at write time; `out` has exactly the tensor's byte size.
  using TensorFill = std::function<void(std::span<std::byte> out)>;

  // `alignment` must be a power of two; when it is not 32 a `general.alignment` u32 is written.
  explicit GgufWriter(uint64_t alignment = 32);

  // Adds a key; std::invalid_argument for a duplicate key.
  void add(std::string key, GgufOutValue value);
  void add_u32(std::string key, uint32_t v) { add(std::move(key), GgufOutValue::u32(v)); }
  void add_i32(std::string key, int32_t v) { add(std::move(key), GgufOutValue::i32(v)); }
  void add_u64(std::string key, uint64_t v) { add(std::move(key), GgufOutValue::u64(v)); }
  void add_f32(std::string key, float v) { add(std::move(key), GgufOutValue::f32(v)); }
  void add_bool(std::string key, bool v) { add(std::move(key), GgufOutValue::boolean(v)); }
  void add_string(std::string key, std::string_view v) {
    add(std::move(key), GgufOutValue::string(v));
  }
  void add_string_array(std::string key, std::span<const std::string> v) {
    add(std::move(key), GgufOutValue::string_array(v));
  }
  template <class T> void add_array(std::string key, std::span<const T> v) {
    add(std::move(key), GgufOutValue::array<T>(v));
  }

  // Adds a tensor (dims innermost first, at most 4). The byte size is ggml_tensor_bytes(type,
  // dims); std::invalid_argument for a duplicate name, a bad shape or data of the wrong size.
  void add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims,
                  std::span<const std::byte> data);  // copied
  void add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims, TensorFill fill);

  uint64_t data_offset() const;  // where the data section starts in the output
  uint64_t total_size() const;   // bytes of the whole file

  // Writes the file (created or truncated, sized up front, memory-mapped, filled in place).
  // Throws std::runtime_error naming the path on an I/O error.
  void write(const std::filesystem::path& path) const;
  std::vector<std::byte> to_bytes() const;
  // Writes into `out`, which must have exactly total_size() bytes.
  void write_to(std::span<std::byte> out) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> dims;
    uint64_t n_bytes;
    uint64_t offset;  // relative to the data section
    std::vector<std::byte> data;  // when copied
    TensorFill fill;              // when produced at write time
  };
  void add_tensor_info(std::string name, GgmlType type, std::vector<uint64_t> dims,
                       std::vector<std::byte> data, TensorFill fill);
  std::vector<std::byte> encode_header() const;  // header + metadata + tensor infos

  uint64_t alignment_;
  uint64_t n_kv_ = 0;
  std::vector<std::byte> metadata_;  // encoded key/value pairs
  std::vector<std::string> keys_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;  // end of the last tensor, relative to the data section
};

}  // namespace bdsl::models
