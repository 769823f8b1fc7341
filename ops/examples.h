// The examples family: the tutorial kernels of docs/writing-kernels.md and the bandwidth probe.
//
// Code outside ops/ and its tests includes this header, not the family's files (checked by
// tests/repository/public_headers_test.cpp).
#pragma once

#include "ops/examples/saxpy.h"
#include "ops/examples/stream_read.h"
#include "ops/examples/subgroup_softmax.h"
#include "ops/examples/workgroup_sum.h"
