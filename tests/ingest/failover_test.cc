#include "ingest/failover.h"

#include <gtest/gtest.h>

namespace switchyard {
namespace {

EndpointProbe Answered(Slot slot, int rounds_without_advance = 0) {
  return EndpointProbe{slot, true, rounds_without_advance};
}
EndpointProbe Silent(std::optional<Slot> slot, int rounds) {
  return EndpointProbe{slot, false, rounds};
}

const FailoverPolicy kPolicy{/*max_lag_slots=*/50, /*stall_rounds=*/3};

TEST(FailoverTest, AnActiveEndpointWithinTheLagStays) {
  EXPECT_FALSE(PlanFromProbes({Answered(1000), Answered(1050)}, 0, kPolicy));
}

TEST(FailoverTest, AnActiveEndpointMoreThanTheLagBehindMovesForLag) {
  const auto plan = PlanFromProbes({Answered(1000), Answered(1051)}, 0, kPolicy);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->target, 1u);
  EXPECT_EQ(plan->reason, FailoverReason::kLag);
}

TEST(FailoverTest, AMoveGoesToTheFirstHealthyEndpointInListOrder) {
  // 0 lags itself, 1 is active and lags, 3 is stalled: 2 is the first healthy one.
  const auto plan =
      PlanFromProbes({Answered(900), Answered(800), Answered(1000), Answered(1000, 3)}, 1, kPolicy);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->target, 2u);
}

TEST(FailoverTest, AStalledActiveEndpointMovesOnlyWhileAnotherAdvances) {
  const auto plan = PlanFromProbes({Answered(1000, 3), Answered(1003)}, 0, kPolicy);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->reason, FailoverReason::kLag);
  // The whole chain stopped: nobody advanced, nobody moves.
  EXPECT_FALSE(PlanFromProbes({Answered(1000, 3), Answered(1001, 3)}, 0, kPolicy));
  // Not stalled for long enough yet.
  EXPECT_FALSE(PlanFromProbes({Answered(1000, 2), Answered(1003)}, 0, kPolicy));
}

TEST(FailoverTest, AnActiveEndpointThatStoppedAnsweringMovesAsDead) {
  const auto plan = PlanFromProbes({Silent(1000, 3), Answered(1010)}, 0, kPolicy);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->target, 1u);
  EXPECT_EQ(plan->reason, FailoverReason::kDead);
  EXPECT_TRUE(PlanFromProbes({Silent(std::nullopt, 3), Answered(10)}, 0, kPolicy));
}

TEST(FailoverTest, NoMoveWhenNoOtherEndpointIsHealthy) {
  EXPECT_FALSE(PlanFromProbes({Answered(800), Silent(1000, 5)}, 0, kPolicy));
  EXPECT_FALSE(PlanFromProbes({Silent(800, 5), Answered(1000, 4)}, 0, kPolicy));
}

TEST(FailoverTest, AFailureMovesToTheFirstHealthyOtherEndpointElseTheNextOne) {
  EXPECT_EQ(NextEndpointAfterFailure({Answered(100), Silent(100, 3), Answered(100)}, 1, kPolicy),
            0u);
  EXPECT_EQ(NextEndpointAfterFailure({Answered(100), Silent(100, 3), Answered(100)}, 0, kPolicy),
            2u);
  // Nothing known (no probes yet, or a single round failed everywhere): round robin.
  EXPECT_EQ(
      NextEndpointAfterFailure({EndpointProbe{}, EndpointProbe{}, EndpointProbe{}}, 2, kPolicy),
      0u);
}

}  // namespace
}  // namespace switchyard
