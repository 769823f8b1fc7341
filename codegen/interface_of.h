// The interface a kernel declares: bindings, push constants, sizes and the device features its
// printed text needs (so the runtime can refuse a device that lacks them, with the reason).
#pragma once
#include "codegen/kernel_interface.h"
#include "dsl/builder.h"

namespace bdsl::codegen {

KernelInterface interface_of(const dsl::Kernel& kernel);

}  // namespace bdsl::codegen
