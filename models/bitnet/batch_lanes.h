// The device buffers of a BitNetBatchDecoder (all lanes, all slots' caches): shared by its
// construction and host side (batch_decoder.cpp) and its recordings (batch_recording.cpp).
// Internal to models/bitnet.
#pragma once
#include <cstdint>
#include <vector>

#include "models/bitnet/batch_decoder.h"
#include "runtime/buffer.h"

namespace bdsl::bitnet {

// Every buffer of the batch. Each lane's logits start at a multiple of logits_stride (the
// storage buffer alignment, at least 64 bytes); the kernels after them index rows themselves.
struct BitNetBatchDecoder::Lanes {
  uint64_t align = 1;  // the device's storage buffer offset alignment

  // A step's inputs (tokens, sequence records, sampling settings: slices of `inputs`), filled by
  // its first dispatch from the staging half of its parity (step_count % 2).
  rt::Buffer inputs, in_staging, step_count;
  rt::BufferSlice tokens, sequences, sample_params;
  rt::BufferSlice logprob_select;  // per output row: where its token is in token_sources, or ops::kNoLogprobs
  // Each output's token where each kind of tail leaves it (TokenSource order: slices of
  // token_sources, source_words apart), copied by the tail's last dispatch to the staging half of
  // its parity for the host.
  rt::Buffer token_sources, out_staging;
  rt::BufferSlice chosen, list_token, full_best, sampled, list_best;
  uint32_t source_words = 0;
  // The outputs' log-probabilities (ops/head/token_logprobs.h), written by the tail into the half
  // of their step's parity.
  rt::Buffer logprob_staging;
  rt::Buffer logprob_part_values, logprob_part_indices, logprob_top_values, logprob_top_indices;  // their alternatives' top-k
  rt::Buffer x, q8, act, q, k, v, attn, ffn, up, xn, xh;
  std::vector<rt::Buffer> k_cache, v_cache;  // per layer: [slots][context][kv_words]
  rt::Buffer partials, counters, logits, arg_values, arg_indices, top_part_values, top_part_indices, top_values, top_indices;
  rt::Buffer vocab_state, vocab_mass, vocab_part_values, vocab_part_indices;  // draws over the vocabulary (top_k 0)
  // The pruned head's (x in int8, its stats, each lane's bounds), and the full head's argmax (its
  // partials apart from the pruned head's, which the same tail may run).
  rt::Buffer xq, head_stats, upper, lower, full_values, full_indices;
  rt::Buffer pick_counters;  // the pruned head's: finished candidates workgroups a row
  // Sampling's pruned head: each row's candidate list (at row * logits_stride) and its count,
  // the draw's k candidates and list length.
  rt::Buffer list_values, list_indices, list_count, list_top_values, list_top_indices, list_length;
  uint64_t logits_stride = 0, cache_slot_bytes = 0;
  uint64_t bytes = 0;  // everything above
};

}  // namespace bdsl::bitnet
