#include "runtime/device_choice.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <stdexcept>
#include <string>

namespace bdsl::rt {
namespace {

int speed_rank(DeviceType type) {
  switch (type) {
    case DeviceType::Discrete: return 0;
    case DeviceType::Integrated: return 1;
    case DeviceType::Virtual: return 2;
    case DeviceType::Cpu: return 3;
    case DeviceType::Other: return 4;
  }
  return 5;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_index(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string available(const std::vector<DeviceInfo>& devices) {
  std::string out;
  for (const auto& d : devices) out += (out.empty() ? "" : "; ") + d.summary();
  return out;
}

bool better(const DeviceInfo& a, const DeviceInfo& b) {
  if (speed_rank(a.type) != speed_rank(b.type)) return speed_rank(a.type) < speed_rank(b.type);
  return a.device_local_bytes > b.device_local_bytes;
}

}  // namespace

size_t choose_device(const std::vector<DeviceInfo>& devices, std::string_view wish) {
  if (devices.empty()) throw std::runtime_error("no Vulkan device found");
  const std::string wanted = lower(wish);
  std::optional<size_t> best;
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    const bool matches = wanted.empty() ||
                         (is_index(wanted) ? std::to_string(d.index) == wanted
                                           : lower(d.name).find(wanted) != std::string::npos);
    if (!matches || !d.api_at_least(2)) continue;
    if (!best || better(d, devices[*best])) best = i;
  }
  if (best) return *best;
  if (wanted.empty())
    throw std::runtime_error("no Vulkan 1.2 device found; available: " + available(devices));
  throw std::runtime_error("device '" + std::string(wish) +
                           "' not found (or below Vulkan 1.2); available: " + available(devices));
}

}  // namespace bdsl::rt
