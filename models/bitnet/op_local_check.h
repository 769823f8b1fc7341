// The CPU reference applied to the GPU's own inputs, op by op: for each position and layer, what
// every fused step of the decode graph should have produced from exactly the values the GPU fed
// it (its residual stream, its attention output, its KV cache). A single int8 value that the two
// sides round differently (a norm summed in another order lands on the other side of a .5) then
// costs one quantization step in one tensor instead of drifting through every later layer and
// position, so each op is held to a tight tolerance whatever happened upstream.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "golden/reference_weights.h"
#include "models/formats/gguf.h"

namespace bdsl::bitnet {

// One decode step's materialized intermediates, by dump name (inp_embd, Qcur-N, kqv_out-N,
// ffn_inp-N, ffn_out-N, l_out-N, result_norm, result_output).
using StepDumps = std::map<std::string, std::vector<float>>;

class OpLocalReference {
 public:
  explicit OpLocalReference(const models::GgufFile& file);

  // Appends to expected[name] the reference's value of every dumped tensor at position `pos`,
  // each computed from the GPU's inputs to that op; Kcur-N / Vcur-N (the cache rows at pos,
  // F16-rounded) too. k_cache[l] / v_cache[l]: the GPU's cache of layer l, at least pos + 1 rows
  // of kv_dim values.
  void expect(uint32_t pos, const StepDumps& gpu, const std::vector<std::vector<float>>& k_cache,
              const std::vector<std::vector<float>>& v_cache, std::map<std::string, std::vector<float>>& expected) const;

  const models::BitNetConfig& config() const { return w_.config; }

 private:
  golden::ReferenceWeights w_;
};

}  // namespace bdsl::bitnet
