// The attention family: RoPE and the F16 KV-cache write, decode attention (split-K over the
// cache, one sequence or many; for many, the norm + int8 of its output that merges the chunks it
// left) and prefill attention (a block against the cache; on tensor cores where the device has
// F16 ones). Internal to ops/: attention_merge.h (the chunk combine).
//
// Code outside ops/ and its tests includes this header, not the family's files (checked by
// tests/repository/public_headers_test.cpp).
#pragma once

#include "ops/attention/attention_decode.h"
#include "ops/attention/attention_dims.h"
#include "ops/attention/attention_output_quantize.h"
#include "ops/attention/attention_prefill.h"
#include "ops/attention/attention_prefill_coopmat.h"
#include "ops/attention/attention_split_kv.h"
#include "ops/attention/rope_kv_write.h"
