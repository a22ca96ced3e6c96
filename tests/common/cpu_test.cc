#include "common/cpu.h"

#include <gtest/gtest.h>
#include <sched.h>

namespace switchyard {
namespace {

// The count follows the affinity mask (taskset, cpusets), not the machine's core count.
TEST(CpuTest, UsableCpuCountFollowsTheAffinityMask) {
  cpu_set_t original;
  CPU_ZERO(&original);
  ASSERT_EQ(sched_getaffinity(0, sizeof(original), &original), 0);
  EXPECT_EQ(UsableCpuCount(), static_cast<size_t>(CPU_COUNT(&original)));
  int first = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && first < 0; ++cpu) {
    if (CPU_ISSET(cpu, &original)) first = cpu;
  }
  ASSERT_GE(first, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(UsableCpuCount(), 1u);
  ASSERT_EQ(sched_setaffinity(0, sizeof(original), &original), 0);
}

}  // namespace
}  // namespace switchyard
