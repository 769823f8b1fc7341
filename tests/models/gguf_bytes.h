// Hand-built GGUF bytes for tests that need files the writer refuses to produce (bad magic,
// absurd counts, overlapping tensors...). Little-endian, field by field.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "models/formats/gguf.h"

namespace bdsl::models::testing {

class GgufBytes {
 public:
  GgufBytes& raw(std::string_view s) {
    for (char c : s) bytes.push_back(static_cast<std::byte>(c));
    return *this;
  }
  template <class T> GgufBytes& put(T v) {
    const std::size_t at = bytes.size();
    bytes.resize(at + sizeof v);
    std::memcpy(bytes.data() + at, &v, sizeof v);
    return *this;
  }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  GgufBytes& str(std::string_view s) { return u64(s.size()).raw(s); }
  // Header: magic, version, tensor count, key/value count.
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  GgufBytes& kv_u32(std::string_view key, uint32_t v) {
    return str(key).u32(static_cast<uint32_t>(GgufValueType::UINT32)).u32(v);
  }
  // A tensor info: name, dims, type, offset.
  GgufBytes& tensor(std::string_view name, std::vector<uint64_t> dims, GgmlType type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(static_cast<uint32_t>(type)).u64(offset);
  }
  GgufBytes& pad_to(std::size_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(std::byte{0});
    return *this;
  }
  GgufBytes& zeros(std::size_t n) {
    bytes.resize(bytes.size() + n);
    return *this;
  }

  std::vector<std::byte> bytes;
};

}  // namespace bdsl::models::testing
