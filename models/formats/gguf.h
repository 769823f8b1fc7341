// GGUF reader (versions 2 and 3): memory-maps the file, parses and bounds-checks the header,
// metadata and tensor infos, and hands out tensor data as spans into the map.
//
// Defensive by design: every count, length, offset and size is checked against the bytes that
// remain before it is used, so a truncated or hostile file yields a GgufError naming the file, the
// field, the byte offset and expected vs found -- never a crash, a hang or a huge allocation.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/formats/ggml_type.h"
#include "models/formats/gguf_value.h"
#include "models/formats/mapped_file.h"

namespace bdsl::models {

inline constexpr uint64_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMaxDims = 4;

struct GgufKeyValue {
  std::string_view key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string_view name;
  GgmlType type;
  std::vector<uint64_t> dims;  // innermost first, as GGUF stores them (ne0 = row length)
  uint64_t offset = 0;         // relative to the data section, as stored
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;        // ggml_tensor_bytes(type, dims)
  uint64_t file_offset = 0;    // data_offset() + offset
};

class GgufFile {
 public:
  // Maps and parses a file. Throws GgufError (or std::runtime_error when it cannot be opened).
  static GgufFile open(const std::filesystem::path& path);
  // Parses bytes the caller keeps alive for the GgufFile's lifetime (tests, the fuzzer).
  // `name` stands for the file name in error messages.
  static GgufFile parse(std::span<const std::byte> bytes, std::string name = "<memory>");

  const std::string& name() const noexcept { return name_; }
  uint32_t version() const noexcept { return version_; }
  uint64_t alignment() const noexcept { return alignment_; }
  uint64_t data_offset() const noexcept { return data_offset_; }
  std::span<const std::byte> bytes() const noexcept { return bytes_; }

  // ---- metadata, in file order ----
  const std::vector<GgufKeyValue>& metadata() const noexcept { return metadata_; }
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const GgufValue* find(std::string_view key) const;  // nullptr when absent
  const GgufValue& get(std::string_view key) const;   // throws GgufError "missing key"

  // Exact-type accessors. get_* throw when the key is missing or has another type (the message
  // names the key, the expected and the found type); find_* return nullopt when it is missing
  // and throw on a type mismatch. T: uint8_t ... double, bool, std::string_view.
  template <class T> T get_as(std::string_view key) const;
  template <class T> std::optional<T> find_as(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const { return get_as<uint32_t>(key); }
  int32_t get_i32(std::string_view key) const { return get_as<int32_t>(key); }
  uint64_t get_u64(std::string_view key) const { return get_as<uint64_t>(key); }
  float get_f32(std::string_view key) const { return get_as<float>(key); }
  bool get_bool(std::string_view key) const { return get_as<bool>(key); }
  std::string_view get_string(std::string_view key) const { return get_as<std::string_view>(key); }
  std::optional<uint32_t> find_u32(std::string_view key) const { return find_as<uint32_t>(key); }
  std::optional<std::string_view> find_string(std::string_view key) const {
    return find_as<std::string_view>(key);
  }
  // Any integer type whose value fits in uint64 (throws naming the key otherwise).
  uint64_t get_uint(std::string_view key) const;
  std::optional<uint64_t> find_uint(std::string_view key) const;
  // FLOAT32, FLOAT64 or an integer, as double.
  double get_float(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;

  const GgufArray& get_array(std::string_view key) const;
  const GgufArray* find_array(std::string_view key) const;  // throws if present but not an array
  std::span<const std::string_view> get_string_array(std::string_view key) const;
  template <class T> std::vector<T> get_array_of(std::string_view key) const;  // exact elem type

  // ---- tensors, in file order ----
  const std::vector<GgufTensorInfo>& tensors() const noexcept { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
  const GgufTensorInfo& tensor(std::string_view name) const;       // throws naming the tensor
  std::span<const std::byte> tensor_data(std::string_view name) const;
  // Asks for every tensor's bytes to be read ahead (mapped files only): a load about to read them all.
  void will_read_tensors() const noexcept;
  // Gives the mapped pages of these tensor bytes back (a load that has them on the device): they
  // no longer count in resident memory; tensor_data still reads them (from the page cache).
  void done_reading(std::span<const std::byte> tensor_bytes) const noexcept;
  // Throws std::runtime_error naming the file when the mapped file changed on disk since it was
  // opened (MappedFile::check_unchanged); nothing for parse(bytes).
  void check_unchanged() const;
  std::span<const std::byte> tensor_data(const GgufTensorInfo& info) const;
  // The file's mapping, shared: whoever reads tensor bytes in place after the GgufFile is gone
  // (a device that reads the weights where they lie) keeps it. Null for parse(bytes).
  std::shared_ptr<const MappedFile> mapping() const noexcept { return map_; }

 private:
  friend class GgufParser;
  GgufFile() = default;
  std::string name_;
  std::shared_ptr<const MappedFile> map_;  // null for parse(bytes)
  std::span<const std::byte> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::unordered_map<std::string_view, std::size_t> key_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, std::size_t> tensor_index_;
};

}  // namespace bdsl::models
