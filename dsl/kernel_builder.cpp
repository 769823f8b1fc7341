#include "dsl/kernel_builder.h"

namespace bdsl::dsl {

KernelBuilder::KernelBuilder(std::string name, std::array<uint32_t, 3> workgroup_size)
    : BuilderCore(std::move(name)) {
  for (uint32_t d : workgroup_size)
    if (d == 0) fail("workgroup size has a zero dimension");
  ir_->workgroup_size = workgroup_size;
}

uint32_t KernelBuilder::workgroup_invocations() const {
  return ir_->workgroup_size[0] * ir_->workgroup_size[1] * ir_->workgroup_size[2];
}

}  // namespace bdsl::dsl
