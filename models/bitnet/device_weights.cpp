#include "models/bitnet/device_weights.h"

#include <fmt/format.h>

#include <optional>

#include "models/bitnet/graph_traits.h"
#include "models/formats/i2s.h"
#include "models/formats/tq.h"
#include "runtime/upload_ring.h"

namespace bdsl::bitnet {
namespace {

constexpr const char* kLayerTensors[] = {"attn_norm", "attn_q", "attn_k",   "attn_v", "attn_output",
                                         "ffn_norm",  "ffn_gate", "ffn_up", "ffn_down"};
constexpr const char* kSubNorms[] = {"attn_sub_norm", "ffn_sub_norm"};  // only in graphs with sub-norms

std::string layer_tensor(uint32_t layer, const char* name) { return fmt::format("blk.{}.{}.weight", layer, name); }

class Uploader {
 public:
  Uploader(rt::Context& ctx, const models::GgufFile& file, uint64_t total, const UploadProgress& progress, bool in_place)
      : ctx_(ctx), ring_(ctx), file_(file), total_(total), progress_(progress),
        mapping_(in_place && weights_in_place(ctx.info()) ? file.mapping() : nullptr) {}

  // A tensor as stored (read in place where the device can), a norm or a projection in I2_S.
  rt::Buffer tensor(const std::string& name) {
    const models::GgufTensorInfo& info = file_.tensor(name);
    if (!models::tq::is_tq(info.type)) return bytes(name, file_.tensor_data(info));
    return projection(name, {}, 0);
  }

  // A ternary projection in I2_S's layout, the one the kernels read. A copy where it must change:
  // TQ1_0/TQ2_0 repacked, rows taken in the order `from` (row r is the file's row from[r]; `cols`
  // columns), or mainline's `.scale` multiplier folded into the per-tensor scale.
  rt::Buffer projection(const std::string& name, std::span<const uint32_t> from, uint32_t cols) {
    const models::GgufTensorInfo& info = file_.tensor(name);
    const float multiplier = models::projection_multiplier(file_, name);
    const bool tq = models::tq::is_tq(info.type);
    if (!tq && from.empty() && multiplier == 1.0f) return bytes(name, file_.tensor_data(info));
    file_.check_unchanged();  // a file cut short under us would fault on its lost pages
    const auto data = file_.tensor_data(info);
    std::vector<std::byte> packed = tq ? models::tq::to_i2s(info.type, data, info.n_elements, name)
                                       : std::vector<std::byte>(data.begin(), data.end());
    if (!from.empty()) packed = models::i2s::reorder_rows(packed, from.size(), cols, from);
    if (multiplier != 1.0f) models::i2s::set_scale(packed, info.n_elements, models::i2s::scale(packed, info.n_elements) * multiplier);
    file_.done_reading(data);
    return counted(copied(name, packed), packed.size());
  }

  SplitMatrix split(const std::string& name, uint32_t rows, uint32_t cols, uint32_t rows_per_part) {
    SplitMatrix m{{}, rows, cols, rows_per_part};
    const auto data = file_.tensor_data(name);
    const uint64_t row_bytes = uint64_t{cols} * 2;
    for (uint32_t first = 0; first < rows; first += m.rows_per_part) {
      const uint32_t n = std::min(m.rows_per_part, rows - first);
      m.parts.push_back(bytes(fmt::format("{}[{}:{}]", name, first, first + n),
                              data.subspan(first * row_bytes, n * row_bytes)));
    }
    return m;
  }

  // Every tensor on the device (the copies stream behind the host's reads of the mapped file).
  uint64_t finish() {
    ring_.finish();
    file_.check_unchanged();  // written while we read it: the device may hold a mix
    return done_;
  }
  uint64_t in_place() const { return in_place_; }

 private:
  // The tensor read in place where the device can, else copied; counted either way.
  rt::Buffer bytes(const std::string& name, std::span<const std::byte> data) {
    file_.check_unchanged();  // a file cut short under us would fault on its lost pages
    std::optional<rt::Buffer> view;
    if (mapping_) view = rt::Buffer::over_host(ctx_, data, mapping_, {.name = name});
    if (view) in_place_ += data.size();
    return counted(view ? std::move(*view) : copied(name, data), data.size());
  }

  // A tensor of `size` bytes is on its way: the progress moves on.
  rt::Buffer counted(rt::Buffer b, uint64_t size) {
    done_ += size;
    if (progress_) progress_(done_, total_);
    return b;
  }

  // `data`: of the mapped file (its pages are released as they go up), or the host's own.
  rt::Buffer copied(const std::string& name, std::span<const std::byte> data) {
    rt::Buffer b(ctx_, data.size(), {false, name});
    // A piece at a time: once in staging, its mapped pages leave resident memory (the F16 table
    // alone is 656 MB on the 2B shape).
    constexpr uint64_t kPiece = 64ull << 20;
    for (uint64_t at = 0; at < data.size(); at += kPiece) {
      const auto piece = data.subspan(at, std::min(kPiece, data.size() - at));
      ring_.upload(b, piece, at);
      file_.done_reading(piece);
    }
    return b;
  }

  rt::Context& ctx_;
  rt::UploadRing ring_;
  const models::GgufFile& file_;
  uint64_t total_;
  const UploadProgress& progress_;
  std::shared_ptr<const models::MappedFile> mapping_;  // set: view tensors in place where the device can
  uint64_t done_ = 0, in_place_ = 0;
};

}  // namespace

bool weights_in_place(const rt::DeviceInfo& device, bool in_place) {
  // A CPU device's memory is the host's: a view of the mapped file costs nothing. An integrated
  // GPU could read in place too (untested there, so it copies).
  return in_place && device.type == rt::DeviceType::Cpu && device.host_import_alignment != 0;
}

uint64_t weight_bytes(const models::GgufFile& file, const models::BitNetConfig& config) {
  // As uploaded: a TQ tensor takes I2_S's size.
  auto size = [&](const std::string& name) {
    const models::GgufTensorInfo& info = file.tensor(name);
    return models::tq::is_tq(info.type) ? models::i2s::packed_bytes(info.n_elements) : file.tensor_data(info).size();
  };
  uint64_t total = size("token_embd.weight") + size("output_norm.weight");
  if (!config.tied_output) total += size("output.weight");
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    for (const char* t : kLayerTensors) total += size(layer_tensor(l, t));
    for (const char* t : kSubNorms)
      if (config.sub_norms) total += size(layer_tensor(l, t));
  }
  return total;
}

DeviceWeights upload_weights(rt::Context& ctx, const models::GgufFile& file, const models::BitNetConfig& config,
                             uint32_t rows_per_part, uint64_t extra_bytes, const UploadProgress& progress, bool in_place) {
  const uint64_t total = weight_bytes(file, config);
  const uint64_t have = ctx.info().device_local_bytes;
  if (have && total + extra_bytes > have)
    throw std::runtime_error(fmt::format(
        "{}: the model needs {} MiB of device memory ({} MiB of weights, {} MiB of activations and KV cache) but "
        "device '{}' has {} MiB",
        file.name(), (total + extra_bytes) >> 20, total >> 20, extra_bytes >> 20, ctx.info().name, have >> 20));
  file.will_read_tensors();
  DeviceWeights w;  // before the uploader: on an error its copies drain before w's buffers go
  Uploader up(ctx, file, total, progress, in_place);
  w.token_embd = up.split("token_embd.weight", config.vocab_size, config.dim, rows_per_part);
  if (!config.tied_output) w.output = up.split("output.weight", config.vocab_size, config.dim, rows_per_part);
  w.output_norm = up.tensor("output_norm.weight");
  // Adjacent-pair RoPE runs as NeoX on attn_q's and attn_k's rows reordered (graph_traits.h).
  const bool reorder = reorders_qk_rows(config);
  const auto q_rows = reorder ? neox_tensor_rows(config, config.n_heads) : std::vector<uint32_t>{};
  const auto k_rows = reorder ? neox_tensor_rows(config, config.n_kv_heads) : std::vector<uint32_t>{};
  for (uint32_t l = 0; l < config.n_layers; ++l) {
    auto t = [&](const char* name) { return up.tensor(layer_tensor(l, name)); };
    auto p = [&](const char* name, const std::vector<uint32_t>& rows = {}) {
      return up.projection(layer_tensor(l, name), rows, config.dim);
    };
    auto sub_norm = [&](const char* name) { return config.sub_norms ? t(name) : rt::Buffer{}; };
    w.layers.push_back(LayerWeights{t("attn_norm"), p("attn_q", q_rows), p("attn_k", k_rows), p("attn_v"), p("attn_output"),
                                    sub_norm("attn_sub_norm"), t("ffn_norm"), p("ffn_gate"), p("ffn_up"), p("ffn_down"),
                                    sub_norm("ffn_sub_norm")});
  }
  w.bytes = up.finish();
  w.in_place_bytes = up.in_place();
  return w;
}

}  // namespace bdsl::bitnet
