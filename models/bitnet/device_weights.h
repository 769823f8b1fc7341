// BitNet weights on the device, uploaded as stored in the GGUF: I2_S projections byte for byte
// (codes and the trailing per-tensor scale), F32 norms, and the F16 token embedding split into
// parts of whole rows that each fit the device's maxStorageBufferRange.
//
// On a CPU device (lavapipe) whose memory is the host's, the weights are not copied at all: each
// tensor's buffer is a read-only view of the mapped file (rt::Buffer::over_host), which the
// buffers keep mapped. The load then costs no copy and the process holds one copy of the
// weights, the file's own pages. A tensor the device cannot view where it lies is copied.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "models/bitnet_config.h"
#include "models/formats/gguf.h"
#include "runtime/buffer.h"
#include "runtime/context.h"
#include "runtime/graph.h"

namespace bdsl::bitnet {

// attn_sub_norm and ffn_sub_norm are empty in a graph without sub-norms. With adjacent-pair RoPE,
// attn_q's and attn_k's rows are held in NeoX order (graph_traits.h: neox_tensor_rows).
struct LayerWeights {
  rt::Buffer attn_norm, attn_q, attn_k, attn_v, attn_output, attn_sub_norm;
  rt::Buffer ffn_norm, ffn_gate, ffn_up, ffn_down, ffn_sub_norm;
};

// A [rows, cols] F16 matrix in parts of `rows_per_part` whole rows (the last may be shorter).
struct SplitMatrix {
  std::vector<rt::Buffer> parts;
  uint32_t rows = 0, cols = 0, rows_per_part = 0;
};

// A split table's parts as the bindings prefix0, prefix1, ... (prefix_0, ... with `separator`).
inline void append_parts(std::vector<rt::Arg>& args, const std::string& prefix, const SplitMatrix& table,
                         const std::string& separator = "") {
  for (size_t p = 0; p < table.parts.size(); ++p) args.push_back({prefix + separator + std::to_string(p), table.parts[p]});
}

struct DeviceWeights {
  SplitMatrix token_embd;
  SplitMatrix output;  // the LM head; empty when tied to token_embd
  rt::Buffer output_norm;
  std::vector<LayerWeights> layers;
  uint64_t bytes = 0;
  uint64_t in_place_bytes = 0;  // of `bytes`, those the device reads where they lie in the mapped file

  const SplitMatrix& lm_head() const { return output.parts.empty() ? token_embd : output; }
};

// Bytes the weights take on the device (what upload() will allocate).
uint64_t weight_bytes(const models::GgufFile& file, const models::BitNetConfig& config);

// Whether upload_weights reads a mapped file's weights in place on this device (a CPU device that
// imports host memory); `in_place` false copies them on every device.
bool weights_in_place(const rt::DeviceInfo& device, bool in_place = true);

// `progress(done_bytes, total_bytes)` is called after each tensor. Throws, before allocating
// anything, when the model (plus `extra_bytes` for activations and the KV cache) does not fit.
using UploadProgress = std::function<void(uint64_t, uint64_t)>;
// `rows_per_part`: rows of each F16 table binding (ops::lm_head_split decides it).
// `in_place`: view the weights where they lie when weights_in_place says the device can.
DeviceWeights upload_weights(rt::Context& ctx, const models::GgufFile& file, const models::BitNetConfig& config,
                             uint32_t rows_per_part, uint64_t extra_bytes = 0, const UploadProgress& progress = {},
                             bool in_place = true);

}  // namespace bdsl::bitnet
