// Which device to run on: a wish (an index, or a case-insensitive name substring) or, without
// one, the fastest kind present: discrete > integrated > virtual > CPU. Pure, so it is testable.
#pragma once
#include <string_view>
#include <vector>

#include "runtime/device_info.h"

namespace bdsl::rt {

// Returns the position in `devices` of the chosen one; throws a std::runtime_error that lists the
// available devices when none is found or the wish matches none. Devices below Vulkan 1.2 are
// never chosen.
size_t choose_device(const std::vector<DeviceInfo>& devices, std::string_view wish);

}  // namespace bdsl::rt
