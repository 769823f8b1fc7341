// GgufFile's lookups and typed accessors (parsing lives in gguf_parser.cpp). Every error names
// the file and the key or tensor, and what was expected versus found.
#include "models/formats/gguf.h"

#include <fmt/format.h>

namespace bdsl::models {

namespace {

[[noreturn]] void wrong_type(const GgufFile& f, std::string_view key, std::string_view expected,
                             GgufValueType found) {
  throw GgufError(fmt::format("{}: metadata key \"{}\": expected {}, found {}", f.name(), key,
                              expected, gguf_value_type_name(found)));
}

}  // namespace

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufValue& GgufFile::get(std::string_view key) const {
  if (const GgufValue* v = find(key)) return *v;
  throw GgufError(fmt::format("{}: missing metadata key \"{}\"", name_, key));
}

template <class T> std::optional<T> GgufFile::find_as(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type() != gguf_type_of<T>()) wrong_type(*this, key, gguf_value_type_name(gguf_type_of<T>()), v->type());
  return v->as<T>();
}

template <class T> T GgufFile::get_as(std::string_view key) const {
  get(key);  // throws naming the key when it is missing
  return *find_as<T>(key);
}

std::optional<uint64_t> GgufFile::find_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!gguf_is_integer(v->type())) wrong_type(*this, key, "an unsigned integer", v->type());
  const auto u = v->to_u64();
  if (!u)
    throw GgufError(fmt::format("{}: metadata key \"{}\": expected a non-negative integer, found {}",
                                name_, key, v->to_string()));
  return u;
}

uint64_t GgufFile::get_uint(std::string_view key) const {
  get(key);
  return *find_uint(key);
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  const auto d = v->to_f64();
  if (!d) wrong_type(*this, key, "a number", v->type());
  return d;
}

double GgufFile::get_float(std::string_view key) const {
  get(key);
  return *find_float(key);
}

const GgufArray* GgufFile::find_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return nullptr;
  if (v->type() != GgufValueType::ARRAY) wrong_type(*this, key, "array", v->type());
  return &v->as_array();
}

const GgufArray& GgufFile::get_array(std::string_view key) const {
  get(key);
  return *find_array(key);
}

std::span<const std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufArray& a = get_array(key);
  if (a.element_type() != GgufValueType::STRING)
    wrong_type(*this, key, "array of string", a.element_type());
  return a.strings();
}

template <class T> std::vector<T> GgufFile::get_array_of(std::string_view key) const {
  const GgufArray& a = get_array(key);
  if (a.element_type() != gguf_type_of<T>())
    wrong_type(*this, key, fmt::format("array of {}", gguf_value_type_name(gguf_type_of<T>())),
               a.element_type());
  return a.to_vector<T>();
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  if (const auto* t = find_tensor(name)) return *t;
  throw GgufError(fmt::format("{}: missing tensor \"{}\"", name_, name));
}

void GgufFile::will_read_tensors() const noexcept {
  if (!map_) return;
  const auto all = map_->bytes();
  if (data_offset_ < all.size()) map_->will_read(all.subspan(data_offset_));
}

void GgufFile::done_reading(std::span<const std::byte> tensor_bytes) const noexcept {
  if (map_) map_->done_reading(tensor_bytes);
}

void GgufFile::check_unchanged() const {
  if (map_) map_->check_unchanged();
}

std::span<const std::byte> GgufFile::tensor_data(std::string_view name) const {
  return tensor_data(tensor(name));
}

std::span<const std::byte> GgufFile::tensor_data(const GgufTensorInfo& info) const {
  // The parser proved this file's tensors lie inside it; an info from another file may not.
  if (info.file_offset > bytes_.size() || info.n_bytes > bytes_.size() - info.file_offset)
    throw GgufError(fmt::format("{}: tensor \"{}\" lies outside this file", name_, info.name));
  return bytes_.subspan(info.file_offset, info.n_bytes);
}

#define BDSL_INSTANTIATE(T)                                                      \
  template T GgufFile::get_as<T>(std::string_view) const;                        \
  template std::optional<T> GgufFile::find_as<T>(std::string_view) const;        \
  template std::vector<T> GgufFile::get_array_of<T>(std::string_view) const;
BDSL_INSTANTIATE(uint8_t) BDSL_INSTANTIATE(int8_t) BDSL_INSTANTIATE(uint16_t)
BDSL_INSTANTIATE(int16_t) BDSL_INSTANTIATE(uint32_t) BDSL_INSTANTIATE(int32_t)
BDSL_INSTANTIATE(uint64_t) BDSL_INSTANTIATE(int64_t) BDSL_INSTANTIATE(float)
BDSL_INSTANTIATE(double) BDSL_INSTANTIATE(bool) BDSL_INSTANTIATE(std::string_view)
#undef BDSL_INSTANTIATE

}  // namespace bdsl::models
