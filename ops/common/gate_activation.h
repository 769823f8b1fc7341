// The FFN's gate activation: act(gate) * up, where act is ReLU² (BitNet b1.58) or SiLU (1bitLLM's
// `bitnet`, `llama`). Used by the gate/up projections' epilogue and by quantize_activations
// when it reads gate and up itself. CPU twins: golden::relu2_gate, golden::silu_gate (the same
// operations in the same order).
#pragma once
#include <string>

#include "dsl/dsl.h"

namespace bdsl::ops {

enum class GateActivation { Relu2, Silu };

inline std::string to_string(GateActivation a) { return a == GateActivation::Relu2 ? "relu2" : "silu"; }

// act(gate) * up, in golden's order: (g * g) * up with g = max(gate, 0); gate / (1 + exp(-gate)) * up.
inline dsl::Expr<dsl::f32> gate_product(GateActivation a, dsl::Expr<dsl::f32> gate, dsl::Expr<dsl::f32> up) {
  using namespace bdsl::dsl;
  if (a == GateActivation::Relu2) {
    auto g = let("gate_relu", max(gate, 0.0f));
    return (g * g) * up;
  }
  auto g = let("gate_silu", gate / (1.0f + exp(-gate)));
  return g * up;
}

}  // namespace bdsl::ops
