#include "ops/attention_decode.h"

namespace bdsl::ops {

dsl::Kernel attention_decode(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                             uint32_t defer_combine) {
  SplitKvTuning tuning;
  tuning.defer_combine = defer_combine;
  return attention_split_kv(defer_combine ? "attention_decode_f16kv_deferred" : "attention_decode_f16kv", target, dims,
                            context, chunks, /*batch=*/false, tuning);
}

}  // namespace bdsl::ops
