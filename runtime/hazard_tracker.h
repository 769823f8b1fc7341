// Decides where the graph needs a barrier: it remembers the byte ranges read and written since
// the last barrier. An operation that reads or writes a range overlapping a pending write
// (read-after-write, write-after-write), or writes a range overlapping a pending read
// (write-after-read), needs a barrier first; everything else runs without one.
#pragma once
#include <vulkan/vulkan.h>

#include <cstdint>
#include <span>
#include <vector>

namespace bdsl::rt {

struct RangeAccess {
  uint64_t resource = 0;  // the VkBuffer, as an integer
  uint64_t begin = 0;     // byte range [begin, end)
  uint64_t end = 0;
  bool write = false;
  VkPipelineStageFlags stage = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
  // The recorder vouches that the elements this access touches are not the ones the pending
  // accesses to the range touch (a range is a whole binding; the elements may depend on run-time
  // values): it needs no barrier itself, and is pending for what follows like any other.
  bool disjoint = false;
};

// The barrier an operation needs; `needed` false when none.
struct BarrierNeed {
  bool needed = false;
  VkPipelineStageFlags src_stages = 0;  // stages of the pending accesses it waits for
  VkAccessFlags src_access = 0;         // their writes, made available
};

class HazardTracker {
 public:
  // What `accesses` (one operation's) need before they run; then records them as pending,
  // after clearing the pending sets when a barrier was needed.
  BarrierNeed add(std::span<const RangeAccess> accesses);
  void clear();

 private:
  bool conflicts(const RangeAccess& a) const;

  std::vector<RangeAccess> pending_;
};

// The access flags a stage's reads or writes use (shader or transfer).
VkAccessFlags read_access(VkPipelineStageFlags stage);
VkAccessFlags write_access(VkPipelineStageFlags stage);

}  // namespace bdsl::rt
