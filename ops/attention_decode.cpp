#include "ops/attention_decode.h"

namespace bdsl::ops {

dsl::Kernel attention_decode(const OpTarget& target, const AttentionDims& dims, uint32_t context, uint32_t chunks) {
  return attention_split_kv("attention_decode_f16kv", target, dims, context, chunks, /*batch=*/false);
}

}  // namespace bdsl::ops
