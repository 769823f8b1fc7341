#include "ops/attention_prefill.h"

namespace bdsl::ops {

dsl::Kernel attention_prefill(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks) {
  return attention_split_kv("attention_prefill_f16kv", target, dims, context, chunks, /*batch=*/true);
}

}  // namespace bdsl::ops
