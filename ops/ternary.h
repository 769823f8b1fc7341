// The ternary family: I2_S (W1.58 A8) projections, one token (matvec), a block of tokens (matmul)
// and on tensor cores (coopmat). Internal to ops/: ternary_projection.h, ternary_row_dots.h and
// rope_kv_epilogue.h (the shared projection body).
//
// Code outside ops/ and its tests includes this header, not the family's files (checked by
// tests/repository/public_headers_test.cpp).
#pragma once

#include "ops/ternary/ternary_matmul.h"
#include "ops/ternary/ternary_matmul_coopmat.h"
#include "ops/ternary/ternary_matvec.h"
