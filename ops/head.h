// The head family: the LM head (f32, batched, tensor cores, and the pruned greedy head), argmax
// and top-k over the logits, and sampling from the top-k candidates.
//
// Code outside ops/ and its tests includes this header, not the family's files (checked by
// tests/repository/public_headers_test.cpp).
#pragma once

#include "ops/head/argmax.h"
#include "ops/head/lm_head.h"
#include "ops/head/lm_head_batch.h"
#include "ops/head/lm_head_bounds_coopmat.h"
#include "ops/head/lm_head_coopmat.h"
#include "ops/head/lm_head_pruned.h"
#include "ops/head/lm_head_shadow.h"
#include "ops/head/repeat_penalty.h"
#include "ops/head/sample_candidates.h"
#include "ops/head/sample_vocabulary.h"
#include "ops/head/token_logprobs.h"
#include "ops/head/top_k.h"
