// The GGUF parser behind GgufFile::open/parse. Reads with a cursor that checks every read
// against the bytes left, and bounds every count by the bytes its items need at minimum, so
// nothing is allocated or looped over that the file could not actually hold.
#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "models/formats/gguf.h"

namespace bdsl::models {

namespace {

constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;        // key length, type, smallest value
constexpr uint64_t kMinArrayBytes = 4 + 8;               // a nested array's type and count
constexpr int kMaxArrayDepth = 8;  // nesting beyond this is hostile; it would only risk the stack

std::string printable(std::span<const std::byte> b) {
  std::string s;
  for (std::byte c : b) {
    const auto u = std::to_integer<unsigned char>(c);
    s += (u >= 0x20 && u < 0x7F) ? std::string(1, static_cast<char>(u)) : fmt::format("\\x{:02x}", u);
  }
  return s;
}

}  // namespace

class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : f_(file), bytes_(file.bytes_) {}

  void run() {
    read_header();
    read_metadata();
    read_alignment();
    read_tensor_infos();
    place_data_section();
    check_tensor_extents();
  }

 private:
  [[noreturn]] void fail(uint64_t at, std::string_view field, std::string_view detail) const {
    throw GgufError(fmt::format("{}: {} at byte {}: {}", f_.name_, field, at, detail));
  }

  uint64_t left() const { return bytes_.size() - pos_; }

  void need(uint64_t n, std::string_view field) const {
    if (n > left())
      fail(pos_, field, fmt::format("truncated: expected {} bytes, found {} before the end of "
                                    "the file (size {})", n, left(), bytes_.size()));
  }

  template <class T> T read(std::string_view field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }

  // A count of items that each need at least `min_item_bytes`: larger than what is left is a lie.
  uint64_t read_count(std::string_view field, uint64_t min_item_bytes) {
    const uint64_t at = pos_;
    const auto n = read<uint64_t>(field);
    if (min_item_bytes && n > left() / min_item_bytes)
      fail(at, field, fmt::format("count {} cannot fit: {} bytes are left and each item needs at "
                                  "least {}", n, left(), min_item_bytes));
    return n;
  }

  std::string_view read_string(std::string_view field) {
    const uint64_t at = pos_;
    const auto n = read<uint64_t>(field);
    if (n > left())
      fail(at, field, fmt::format("string length {} exceeds the {} bytes left in the file", n, left()));
    const auto* p = reinterpret_cast<const char*>(bytes_.data() + pos_);
    pos_ += n;
    return {p, static_cast<std::size_t>(n)};
  }

  GgufValueType read_value_type(std::string_view field) {
    const uint64_t at = pos_;
    const auto t = read<uint32_t>(field);
    if (t > static_cast<uint32_t>(GgufValueType::FLOAT64))
      fail(at, field, fmt::format("unknown value type {} (expected 0..12)", t));
    return static_cast<GgufValueType>(t);
  }

  GgufValue read_value(GgufValueType type, std::string_view field, int depth) {
    GgufValue v;
    v.type_ = type;
    if (type == GgufValueType::STRING) {
      v.string_ = read_string(field);
    } else if (type == GgufValueType::ARRAY) {
      auto array = std::make_shared<GgufArray>();
      read_array(*array, field, depth + 1);
      v.array_ = std::move(array);
    } else {
      const uint64_t size = gguf_scalar_size(type);
      need(size, field);
      std::memcpy(&v.bits_, bytes_.data() + pos_, size);
      pos_ += size;
    }
    return v;
  }

  void read_array(GgufArray& a, std::string_view field, int depth) {
    if (depth > kMaxArrayDepth)
      fail(pos_, field, fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
    a.element_type_ = read_value_type(field);
    const GgufValueType t = a.element_type_;
    const uint64_t min_item = t == GgufValueType::STRING  ? 8
                              : t == GgufValueType::ARRAY ? kMinArrayBytes
                                                          : gguf_scalar_size(t);
    a.count_ = read_count(field, min_item);
    if (t == GgufValueType::STRING) {
      a.strings_.reserve(a.count_);
      for (uint64_t i = 0; i < a.count_; ++i) a.strings_.push_back(read_string(field));
    } else if (t == GgufValueType::ARRAY) {
      a.arrays_.reserve(a.count_);
      for (uint64_t i = 0; i < a.count_; ++i) a.arrays_.push_back(read_value(t, field, depth));
    } else {
      a.raw_ = bytes_.subspan(pos_, a.count_ * min_item);
      pos_ += a.count_ * min_item;
    }
  }

  void read_header() {
    need(4, "magic");
    if (std::memcmp(bytes_.data(), "GGUF", 4) != 0)
      fail(0, "magic", fmt::format("expected \"GGUF\", found \"{}\"", printable(bytes_.first(4))));
    pos_ = 4;
    const auto version = read<uint32_t>("version");
    if (version == 1)
      fail(4, "version", "GGUF v1 (32-bit counts) is not supported; expected 2 or 3");
    if (version != 2 && version != 3)
      fail(4, "version", fmt::format("expected 2 or 3, found {}{}", version,
                                     version == 0x03000000 || version == 0x02000000
                                         ? " (a big-endian file, which is not supported)" : ""));
    f_.version_ = version;
    n_tensors_ = read_count("tensor count", kMinTensorInfoBytes);
    n_kv_ = read_count("metadata key/value count", kMinKeyValueBytes);
  }

  void read_metadata() {
    f_.metadata_.reserve(n_kv_);
    for (uint64_t i = 0; i < n_kv_; ++i) {
      const uint64_t at = pos_;
      const std::string field = fmt::format("metadata key #{}", i);
      const std::string_view key = read_string(field);
      const std::string value_field = fmt::format("value of metadata key \"{}\"", key);
      const GgufValueType type = read_value_type(value_field);
      GgufValue value = read_value(type, value_field, 0);
      if (!f_.key_index_.emplace(key, f_.metadata_.size()).second)
        fail(at, field, fmt::format("duplicate key \"{}\"", key));
      if (key == "general.alignment") alignment_at_ = at;
      f_.metadata_.push_back({key, std::move(value)});
    }
  }

  void read_alignment() {
    const GgufValue* v = f_.find("general.alignment");
    if (!v) return;
    if (v->type() != GgufValueType::UINT32)
      fail(alignment_at_, "metadata key \"general.alignment\"",
           fmt::format("expected uint32, found {}", gguf_value_type_name(v->type())));
    const uint32_t a = v->as<uint32_t>();
    if (a == 0 || (a & (a - 1)) != 0)
      fail(alignment_at_, "metadata key \"general.alignment\"",
           fmt::format("expected a power of two, found {}", a));
    f_.alignment_ = a;
  }

  void read_tensor_infos() {
    f_.tensors_.reserve(n_tensors_);
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      const uint64_t at = pos_;
      GgufTensorInfo t = read_tensor_info(i);
      if (!f_.tensor_index_.emplace(t.name, f_.tensors_.size()).second)
        fail(at, fmt::format("tensor info #{}", i), fmt::format("duplicate tensor name \"{}\"", t.name));
      f_.tensors_.push_back(std::move(t));
    }
  }

  GgufTensorInfo read_tensor_info(uint64_t index) {
    GgufTensorInfo t;
    t.name = read_string(fmt::format("tensor info #{} name", index));
    const std::string field = fmt::format("tensor \"{}\"", t.name);
    const uint64_t dims_at = pos_;
    const auto n_dims = read<uint32_t>(field + " n_dims");
    if (n_dims > kGgufMaxDims)
      fail(dims_at, field + " n_dims", fmt::format("expected at most {}, found {}", kGgufMaxDims, n_dims));
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t at = pos_;
      const auto dim = read<uint64_t>(field + " dims");
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(at, field + " dims", fmt::format("dimension {} is {}, larger than ggml's int64 limit", d, dim));
      t.dims.push_back(dim);
    }
    const uint64_t type_at = pos_;
    const auto type_id = read<uint32_t>(field + " type");
    if (!find_ggml_type(type_id)) fail(type_at, field + " type", fmt::format("unknown ggml type id {}", type_id));
    t.type = static_cast<GgmlType>(type_id);
    try {
      t.n_elements = ggml_element_count(t.dims);
      t.n_bytes = ggml_tensor_bytes(t.type, t.dims);
    } catch (const GgmlTypeError& e) {
      fail(dims_at, field + " shape", e.what());
    }
    const uint64_t offset_at = pos_;
    t.offset = read<uint64_t>(field + " offset");
    if (t.offset % f_.alignment_ != 0)
      fail(offset_at, field + " offset",
           fmt::format("expected a multiple of the alignment {}, found {}", f_.alignment_, t.offset));
    return t;
  }

  void place_data_section() {
    const uint64_t a = f_.alignment_;
    const uint64_t pad = (a - pos_ % a) % a;
    f_.data_offset_ = pos_ + pad;
    // A file without tensors may end right after its infos; gguf-py pads it anyway.
    if (!f_.tensors_.empty() && f_.data_offset_ > bytes_.size())
      fail(pos_, "data section padding",
           fmt::format("truncated: the data section should start at byte {}, past the end of the "
                       "file (size {})", f_.data_offset_, bytes_.size()));
  }

  void check_tensor_extents() {
    const uint64_t data_size = bytes_.size() - std::min<uint64_t>(f_.data_offset_, bytes_.size());
    std::vector<const GgufTensorInfo*> by_offset;
    by_offset.reserve(f_.tensors_.size());
    for (auto& t : f_.tensors_) {
      if (t.offset > data_size || t.n_bytes > data_size - t.offset)
        fail(f_.data_offset_ + std::min(t.offset, data_size), fmt::format("tensor \"{}\" data", t.name),
             fmt::format("expected {} bytes at data offset {} (file byte {}), but the data section "
                         "holds only {} bytes (file size {})", t.n_bytes, t.offset,
                         f_.data_offset_ + t.offset, data_size, bytes_.size()));
      t.file_offset = f_.data_offset_ + t.offset;
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](auto* x, auto* y) { return x->offset < y->offset; });
    // Walk in offset order keeping the furthest end so far: zero-byte tensors overlap nothing.
    const GgufTensorInfo* furthest = nullptr;
    for (const auto* cur : by_offset) {
      if (cur->n_bytes == 0) continue;
      if (furthest && furthest->offset + furthest->n_bytes > cur->offset)
        fail(cur->file_offset, fmt::format("tensor \"{}\" data", cur->name),
             fmt::format("overlaps tensor \"{}\": it starts at data offset {}, before the other "
                         "ends at {}", furthest->name, cur->offset, furthest->offset + furthest->n_bytes));
      if (!furthest || cur->offset + cur->n_bytes > furthest->offset + furthest->n_bytes) furthest = cur;
    }
  }

  GgufFile& f_;
  std::span<const std::byte> bytes_;
  uint64_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t alignment_at_ = 0;  // where the general.alignment pair starts, for its errors
};

GgufFile GgufFile::parse(std::span<const std::byte> bytes, std::string name) {
  GgufFile file;
  file.name_ = std::move(name);
  file.bytes_ = bytes;
  GgufParser(file).run();
  return file;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  GgufFile file;
  file.name_ = path.string();
  file.map_ = std::make_shared<const MappedFile>(path);
  file.bytes_ = file.map_->bytes();
  GgufParser(file).run();
  return file;
}

}  // namespace bdsl::models
