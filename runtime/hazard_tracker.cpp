#include "runtime/hazard_tracker.h"

namespace bdsl::rt {
namespace {

bool overlap(const RangeAccess& a, const RangeAccess& b) {
  return a.resource == b.resource && a.begin < b.end && b.begin < a.end;
}

}  // namespace

VkAccessFlags read_access(VkPipelineStageFlags stage) {
  return stage == VK_PIPELINE_STAGE_TRANSFER_BIT ? VK_ACCESS_TRANSFER_READ_BIT
                                                 : VK_ACCESS_SHADER_READ_BIT;
}

VkAccessFlags write_access(VkPipelineStageFlags stage) {
  return stage == VK_PIPELINE_STAGE_TRANSFER_BIT ? VK_ACCESS_TRANSFER_WRITE_BIT
                                                 : VK_ACCESS_SHADER_WRITE_BIT;
}

bool HazardTracker::conflicts(const RangeAccess& a) const {
  if (a.disjoint) return false;
  for (const RangeAccess& p : pending_)
    if ((p.write || a.write) && overlap(a, p)) return true;
  return false;
}

BarrierNeed HazardTracker::add(std::span<const RangeAccess> accesses) {
  BarrierNeed need;
  for (const RangeAccess& a : accesses) need.needed = need.needed || conflicts(a);
  if (need.needed) {
    for (const RangeAccess& p : pending_) {
      need.src_stages |= p.stage;
      if (p.write) need.src_access |= write_access(p.stage);
    }
    pending_.clear();
  }
  pending_.insert(pending_.end(), accesses.begin(), accesses.end());
  return need;
}

void HazardTracker::clear() { pending_.clear(); }

}  // namespace bdsl::rt
