// The bug this guards against: after the base layer had been idle for a few seconds, its HTTP
// server had closed the ingest's kept connection, the next read failed, the ingest session was
// torn down and the routing went on from a frozen state. The base here closes idle
// connections after 5 s (its default); each round is idle for 6 s and then delegates a new
// account, which must be routed to its ER within 1 s of its confirmation on base.
#include "tests/support/delegation_lag.h"

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

TEST(DelegationLagTest, AfterIdlePeriodsNewDelegationsAreRoutedToTheirErWithinASecond) {
  testing::TempDir dir;
  testing::DelegationLagOptions options;
  options.switchyard_binary = SWITCHYARD_BINARY;
  options.localnet_binary = SWITCHYARD_LOCALNET_BINARY;
  options.work_dir = dir.Sub("lag");
  options.max_rounds = 7;
  auto harness = testing::DelegationLagHarness::Start(options);
  ASSERT_TRUE(harness.ok()) << harness.status();
  // A first round without idling: serve's backfill is done and the path is warm.
  absl::StatusOr<absl::Duration> warm = (*harness)->Round(absl::ZeroDuration());
  ASSERT_TRUE(warm.ok()) << warm.status();
  for (int round = 0; round < 6; ++round) {
    absl::StatusOr<absl::Duration> lag = (*harness)->Round(absl::Seconds(6));
    ASSERT_TRUE(lag.ok()) << "round " << round << ": " << lag.status();
    EXPECT_LE(*lag, absl::Seconds(1)) << "round " << round;
  }
}

}  // namespace
}  // namespace switchyard
