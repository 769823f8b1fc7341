// The common family: per-token norms (their scale at bitnet.cpp's rounding points: norm_scale.h)
// and int8 quantization, the FFN gate activations, the
// embedding lookup, F16 packing, the step state the recorded graphs read and the parity copies
// that stage a replayed recording's inputs and outputs. Internal to ops/:
// exact_division.h, matrix_support.h, rope_rotation.h (helpers the other families build kernels with).
//
// Code outside ops/ and its tests includes this header, not the family's files (checked by
// tests/repository/public_headers_test.cpp).
#pragma once

#include "ops/common/embedding_lookup.h"
#include "ops/common/gate_activation.h"
#include "ops/common/matrix_fragments.h"
#include "ops/common/norm_scale.h"
#include "ops/common/pack_half.h"
#include "ops/common/parity_copy.h"
#include "ops/common/quantize_activations.h"
#include "ops/common/rms_norm.h"
#include "ops/common/step_state.h"
