#include "ops/examples/stream_read.h"

#include "dsl/dsl.h"

namespace bdsl::ops {
using namespace bdsl::dsl;

uint32_t stream_read_workgroup(const OpTarget& target) { return std::min(256u, target.max_workgroup_invocations); }

dsl::Kernel stream_read(const OpTarget& target) {
  const uint32_t wg = stream_read_workgroup(target);
  KernelBuilder k("stream_read", {wg, 1, 1});
  auto data = k.buffer<uvec4>("data", Access::Read);
  auto out = k.buffer<u32>("out", Access::Write);
  auto words = k.push<u32>("words");
  auto stride = k.num_workgroups().x() * wg;
  auto acc = k.var<u32>("acc", 0u);
  for_range(k.global_id().x(), words, stride, [&](Expr<u32> i) {
    Expr<uvec4> v = data[i];
    acc = acc ^ v.x() ^ v.y() ^ v.z() ^ v.w();
  });
  // One word per workgroup, so the reads cannot be optimised away and writes cost nothing.
  auto total = let("total", subgroup_add(acc));
  if_(k.local_index() == 0u, [&] { out[k.workgroup_id().x()] = total; });
  return k.build();
}

}  // namespace bdsl::ops
