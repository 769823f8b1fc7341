// The experimental family: fused decode phases and the persistent projection chain, off the
// default path (slower than separate kernels: bench/RESULTS.md runs 4 and 5), kept with their tests.
//
// Code outside ops/ and its tests includes this header, not the family's files (checked by
// tests/repository/public_headers_test.cpp).
#pragma once

#include "ops/experimental/decode_layer.h"
#include "ops/experimental/persistent_chain.h"
#include "ops/experimental/phase_sync.h"
