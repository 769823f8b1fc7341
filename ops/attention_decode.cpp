#include "ops/attention_decode.h"

#include <string>

namespace bdsl::ops {

dsl::Kernel attention_decode(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks,
                             uint32_t defer_combine, uint32_t head_split) {
  SplitKvTuning tuning;
  tuning.defer_combine = defer_combine;
  tuning.head_split = head_split;
  const std::string split = head_split > 1 ? "_split" + std::to_string(head_split) : "";
  return attention_split_kv((defer_combine ? "attention_decode_f16kv_deferred" : "attention_decode_f16kv") + split, target,
                            dims, context, chunks, /*batch=*/false, tuning);
}

}  // namespace bdsl::ops
