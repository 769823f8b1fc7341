// The barrier rule on its own, without a device.
#include <gtest/gtest.h>

#include "runtime/hazard_tracker.h"

namespace bdsl::rt {
namespace {

RangeAccess read(uint64_t buffer, uint64_t begin, uint64_t end) {
  return {buffer, begin, end, false, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT};
}
RangeAccess write(uint64_t buffer, uint64_t begin, uint64_t end) {
  return {buffer, begin, end, true, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT};
}

bool needs(HazardTracker& t, std::initializer_list<RangeAccess> accesses) {
  return t.add(std::vector<RangeAccess>(accesses)).needed;
}

TEST(HazardTracker, ReadAfterWriteNeedsABarrier) {
  HazardTracker t;
  EXPECT_FALSE(needs(t, {write(1, 0, 64)}));
  EXPECT_TRUE(needs(t, {read(1, 32, 48), write(2, 0, 64)}));
}

TEST(HazardTracker, ReadsNeverWaitForReads) {
  HazardTracker t;
  EXPECT_FALSE(needs(t, {read(1, 0, 64)}));
  EXPECT_FALSE(needs(t, {read(1, 0, 64), write(2, 0, 4)}));
}

TEST(HazardTracker, WriteAfterReadAndWriteAfterWriteNeedABarrier) {
  HazardTracker t;
  EXPECT_FALSE(needs(t, {read(1, 0, 64)}));
  EXPECT_TRUE(needs(t, {write(1, 60, 61)}));
  EXPECT_TRUE(needs(t, {write(1, 56, 64)}));  // overlaps the pending write
}

TEST(HazardTracker, DisjointRangesOfOneBufferAreIndependent) {
  HazardTracker t;
  EXPECT_FALSE(needs(t, {write(1, 0, 64)}));
  EXPECT_FALSE(needs(t, {write(1, 64, 128)}));
  EXPECT_FALSE(needs(t, {read(1, 128, 256), write(1, 256, 512)}));
  EXPECT_TRUE(needs(t, {read(1, 63, 65)}));
}

TEST(HazardTracker, VouchedDisjointAccessesRaiseNoBarrierButStayPending) {
  HazardTracker t;
  EXPECT_FALSE(needs(t, {write(1, 0, 64)}));
  RangeAccess vouched = read(1, 0, 64);
  vouched.disjoint = true;
  EXPECT_FALSE(needs(t, {vouched, write(2, 0, 64)}));
  EXPECT_TRUE(needs(t, {write(1, 0, 4)}));  // waits for the vouched read too
  EXPECT_TRUE(needs(t, {vouched, read(1, 0, 4)}));  // an unvouched access still counts
}

TEST(HazardTracker, ABarrierResetsThePendingSets) {
  HazardTracker t;
  needs(t, {write(1, 0, 64)});
  needs(t, {write(2, 0, 64)});
  EXPECT_TRUE(needs(t, {read(1, 0, 64)}));   // waits for both writes
  EXPECT_FALSE(needs(t, {read(2, 0, 64)}));  // buffer 2's write was covered by that barrier
}

TEST(HazardTracker, BarrierCarriesThePendingStagesAndWrites) {
  HazardTracker t;
  t.add(std::vector<RangeAccess>{{1, 0, 64, true, VK_PIPELINE_STAGE_TRANSFER_BIT}});
  const BarrierNeed need = t.add(std::vector<RangeAccess>{read(1, 0, 4)});
  EXPECT_TRUE(need.needed);
  EXPECT_EQ(need.src_stages, VkPipelineStageFlags(VK_PIPELINE_STAGE_TRANSFER_BIT));
  EXPECT_EQ(need.src_access, VkAccessFlags(VK_ACCESS_TRANSFER_WRITE_BIT));
}

}  // namespace
}  // namespace bdsl::rt
