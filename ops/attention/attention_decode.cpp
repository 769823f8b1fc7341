#include "ops/attention/attention_decode.h"

#include <stdexcept>
#include <string>

namespace bdsl::ops {

namespace {
// `base` with the tuning's non-default shape: the kernel's name says which variant it is.
std::string kernel_name(std::string base, const SplitKvTuning& tuning) {
  if (tuning.head_split > 1) base += "_split" + std::to_string(tuning.head_split);
  if (tuning.positions_per_pass != SplitKvTuning{}.positions_per_pass) base += "_p" + std::to_string(tuning.positions_per_pass);
  if (tuning.chunks_per_workgroup > 1) base += "_c" + std::to_string(tuning.chunks_per_workgroup);
  if (tuning.whole_pass_chunks && !tuning.defer_combine) base += "_whole";
  return base;
}
}  // namespace

dsl::Kernel attention_decode(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                             const SplitKvTuning& tuning) {
  const std::string name = kernel_name(tuning.defer_combine ? "attention_decode_f16kv_deferred" : "attention_decode_f16kv", tuning);
  return attention_split_kv(name, target, dims, context, chunks, /*batch=*/false, tuning);
}

dsl::Kernel attention_decode_sequences(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                                       const SplitKvTuning& tuning, bool one_sequence) {
  const std::string base = tuning.defer_combine ? "attention_decode_sequences_f16kv_deferred" : "attention_decode_sequences_f16kv";
  return attention_split_kv(kernel_name(base, tuning) + (one_sequence ? "_one" : ""), target, dims, context, chunks,
                            /*batch=*/true, tuning, /*sequences=*/true, one_sequence);
}

Plan plan_attention_decode(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                           const SplitKvTuning& tuning) {
  return {attention_decode(target, dims, context, chunks, tuning),
          fixed_grid({dims.n_kv_heads * attention_head_split(dims, tuning), attention_chunk_workgroups(chunks, tuning), 1})};
}

Plan plan_attention_decode_sequences(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                                     const SplitKvTuning& tuning, bool one_sequence) {
  const uint32_t heads = dims.n_kv_heads * attention_head_split(dims, tuning);
  const uint32_t groups = attention_chunk_workgroups(chunks, tuning);
  return {attention_decode_sequences(target, dims, context, chunks, tuning, one_sequence),
          [heads, groups, one_sequence](uint32_t tokens) {
            if (one_sequence && tokens != 1)
              throw std::invalid_argument("attention_decode_sequences for one sequence dispatched for " + std::to_string(tokens));
            return rt::Grid{heads, groups, tokens};
          }};
}

}  // namespace bdsl::ops
