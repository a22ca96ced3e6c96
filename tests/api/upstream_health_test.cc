// Per-endpoint health with time points built by hand: ejection, recovery and its ramp, lag,
// the circuit breaker, Retry-After, hedge delays and the retry budget.
#include "api/upstream/upstream_health.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/upstream/upstream.h"
#include "common/metrics.h"

namespace switchyard {
namespace {

using Admission = EndpointHealth::Admission;
using std::chrono::milliseconds;

HealthClock::duration Chrono(absl::Duration d) {
  return std::chrono::duration_cast<HealthClock::duration>(absl::ToChronoNanoseconds(d));
}

class UpstreamHealthTest : public testing::Test {
 protected:
  // A target of `endpoints` endpoints under options_ as they are now.
  void Make(size_t endpoints = 2) {
    target_.name = "base";
    target_.endpoints.clear();
    for (size_t i = 0; i < endpoints; ++i) {
      target_.endpoints.push_back({"http://node" + std::to_string(i) + ":8899", 1});
    }
    health_ = std::make_unique<TargetHealth>(target_, options_, &registry_);
  }
  EndpointHealth& endpoint(size_t i) { return health_->endpoint(i); }

  // A time point `d` after a fixed origin well past the clock's epoch.
  static HealthClock::time_point At(absl::Duration d) {
    return HealthClock::time_point{} + std::chrono::hours(1000) + Chrono(d);
  }

  static void Exchange(EndpointHealth& e, ExchangeOutcome outcome, HealthClock::time_point now,
                       HealthClock::duration latency = milliseconds(1), bool trial = false) {
    e.Begin();
    e.End(outcome, latency, trial, now);
  }
  static void Fail(EndpointHealth& e, HealthClock::time_point now, bool trial = false) {
    Exchange(e, ExchangeOutcome::kServerError, now, milliseconds(1), trial);
  }
  static void Succeed(EndpointHealth& e, HealthClock::time_point now, bool trial = false) {
    Exchange(e, ExchangeOutcome::kOk, now, milliseconds(1), trial);
  }
  static void ProbeOk(EndpointHealth& e, HealthClock::time_point now, Slot slot = 1000) {
    e.OnProbe(slot, true, now);
  }
  static void ProbeFails(EndpointHealth& e, HealthClock::time_point now) {
    e.OnProbe(absl::UnavailableError("connection refused"), false, now);
  }

  // The value of a series as rendered; -1 when it is not there.
  int64_t Value(const std::string& series) const {
    const std::string text = registry_.RenderPrometheus();
    const std::string prefix = "\n" + series + " ";
    const size_t at = text.find(prefix);
    if (at == std::string::npos) return -1;
    const size_t begin = at + prefix.size();
    return std::stoll(text.substr(begin, text.find('\n', begin) - begin));
  }

  UpstreamHealthOptions options_;
  UpstreamTarget target_;
  MetricsRegistry registry_;
  std::unique_ptr<TargetHealth> health_;
};

TEST_F(UpstreamHealthTest, ConsecutiveFailuresEject) {
  options_.eject_consecutive_failures = 3;
  Make();
  const auto t = At(absl::ZeroDuration());
  Fail(endpoint(0), t);
  Fail(endpoint(0), t);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);
  EXPECT_EQ(endpoint(0).Admit(t, 0.5), Admission::kYes);
  Fail(endpoint(0), t);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kEjected);
  EXPECT_EQ(endpoint(0).Admit(t, 0.0), Admission::kNo);
  EXPECT_EQ(endpoint(1).state(), EndpointState::kHealthy);
  EXPECT_FALSE(health_->degraded());
  EXPECT_NE(endpoint(0).Status().ejected_reason.find("3 failures in a row"), std::string::npos)
      << endpoint(0).Status().ejected_reason;
}

TEST_F(UpstreamHealthTest, SuccessBetweenFailuresResetsTheConsecutiveCount) {
  options_.eject_consecutive_failures = 3;
  Make();
  const auto t = At(absl::ZeroDuration());
  for (int i = 0; i < 5; ++i) {
    Fail(endpoint(0), t);
    Fail(endpoint(0), t);
    Succeed(endpoint(0), t);
  }
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);
}

TEST_F(UpstreamHealthTest, ErrorRateOverTheWindowEjects) {
  options_.eject_consecutive_failures = 100;
  options_.min_requests = 10;
  options_.eject_error_rate = 0.5;
  options_.circuit_min_requests = 1000;
  Make();
  const auto t = At(absl::ZeroDuration());
  // 9 exchanges, 5 failed: above the rate, below min_requests.
  for (int i = 0; i < 4; ++i) {
    Fail(endpoint(0), t);
    Succeed(endpoint(0), t);
  }
  Fail(endpoint(0), t);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);
  // The tenth, a failure: 6 of 10.
  Fail(endpoint(0), t + milliseconds(10));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kEjected);
  EXPECT_NE(endpoint(0).Status().ejected_reason.find("6 of 10"), std::string::npos)
      << endpoint(0).Status().ejected_reason;
}

TEST_F(UpstreamHealthTest, ErrorRateBelowTheThresholdDoesNotEject) {
  options_.eject_consecutive_failures = 100;
  options_.min_requests = 10;
  options_.eject_error_rate = 0.5;
  options_.circuit_min_requests = 1000;
  Make();
  const auto t = At(absl::ZeroDuration());
  for (int i = 0; i < 20; ++i) {
    Fail(endpoint(0), t);
    Succeed(endpoint(0), t);
    Succeed(endpoint(0), t);
  }
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);
}

TEST_F(UpstreamHealthTest, FailuresOlderThanTheWindowDoNotCount) {
  options_.eject_consecutive_failures = 100;
  options_.min_requests = 4;
  options_.eject_error_rate = 0.5;
  options_.window = absl::Seconds(10);
  options_.circuit_min_requests = 1000;
  Make();
  Fail(endpoint(0), At(absl::ZeroDuration()));
  Fail(endpoint(0), At(absl::ZeroDuration()));
  Fail(endpoint(0), At(absl::ZeroDuration()));
  Succeed(endpoint(0), At(absl::Seconds(11)));
  Fail(endpoint(0), At(absl::Seconds(11)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);
}

TEST_F(UpstreamHealthTest, LastEndpointInRotationIsNeverEjectedAndTheTargetIsDegraded) {
  options_.eject_consecutive_failures = 2;
  Make();
  const auto t = At(absl::ZeroDuration());
  Fail(endpoint(0), t);
  Fail(endpoint(0), t);
  ASSERT_EQ(endpoint(0).state(), EndpointState::kEjected);
  EXPECT_FALSE(health_->degraded());
  for (int i = 0; i < 5; ++i) Fail(endpoint(1), t);
  EXPECT_EQ(endpoint(1).state(), EndpointState::kHealthy);
  EXPECT_EQ(endpoint(1).Admit(t, 0.99), Admission::kYes);
  EXPECT_TRUE(health_->degraded());
  EXPECT_TRUE(health_->Status().degraded);
  EXPECT_EQ(Value(R"(switchyard_upstream_degraded{target="base"})"), 1);
}

TEST_F(UpstreamHealthTest, LoneEndpointIsNeverEjected) {
  options_.eject_consecutive_failures = 2;
  Make(1);
  const auto t = At(absl::ZeroDuration());
  for (int i = 0; i < 5; ++i) Fail(endpoint(0), t);
  ProbeFails(endpoint(0), t);
  ProbeFails(endpoint(0), t);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);
  EXPECT_TRUE(health_->degraded());
}

TEST_F(UpstreamHealthTest, TwoFailedProbesInARowEject) {
  Make();
  const auto t = At(absl::ZeroDuration());
  ProbeFails(endpoint(0), t);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);
  ProbeOk(endpoint(0), t + milliseconds(100));
  ProbeFails(endpoint(0), t + milliseconds(200));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);  // not in a row
  // getHealth saying the node is unhealthy is a failed probe too.
  endpoint(0).OnProbe(Slot{1000}, false, t + milliseconds(300));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kEjected);
  EXPECT_NE(endpoint(0).Status().ejected_reason.find("2 probes failed"), std::string::npos);
}

// Ejects endpoint 0 by probes at `t`.
void EjectByProbes(EndpointHealth& e, HealthClock::time_point t) {
  e.OnProbe(absl::UnavailableError("down"), false, t);
  e.OnProbe(absl::UnavailableError("down"), false, t);
  ASSERT_EQ(e.state(), EndpointState::kEjected);
}

TEST_F(UpstreamHealthTest, RecoveryNeedsRecoverProbesAfterMinEjection) {
  options_.min_ejection = absl::Seconds(1);
  options_.recover_probes = 2;
  Make();
  EjectByProbes(endpoint(0), At(absl::ZeroDuration()));
  // Two good probes, but within min_ejection.
  ProbeOk(endpoint(0), At(absl::Milliseconds(300)));
  ProbeOk(endpoint(0), At(absl::Milliseconds(600)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kEjected);
  // A failed one starts the count again.
  ProbeFails(endpoint(0), At(absl::Milliseconds(900)));
  ProbeOk(endpoint(0), At(absl::Milliseconds(1100)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kEjected);
  EXPECT_EQ(endpoint(0).Admit(At(absl::Milliseconds(1100)), 0.0), Admission::kNo);
  ProbeOk(endpoint(0), At(absl::Milliseconds(1200)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kRecovering);
}

TEST_F(UpstreamHealthTest, RecoveringEndpointTakesAGrowingShareThenIsHealthyAfterRampUp) {
  options_.ramp_up = absl::Seconds(3);
  Make();
  EjectByProbes(endpoint(0), At(absl::ZeroDuration()));
  ProbeOk(endpoint(0), At(absl::Seconds(1)));
  const absl::Duration start = absl::Milliseconds(1500);
  ProbeOk(endpoint(0), At(start));
  ASSERT_EQ(endpoint(0).state(), EndpointState::kRecovering);
  // 10 % at the start of the ramp.
  EXPECT_EQ(endpoint(0).Admit(At(start), 0.05), Admission::kYes);
  EXPECT_EQ(endpoint(0).Admit(At(start), 0.95), Admission::kNo);
  // Half-way: 55 %.
  EXPECT_EQ(endpoint(0).Admit(At(start + absl::Milliseconds(1500)), 0.5), Admission::kYes);
  EXPECT_EQ(endpoint(0).Admit(At(start + absl::Milliseconds(1500)), 0.6), Admission::kNo);
  // All of it at the end.
  EXPECT_EQ(endpoint(0).Admit(At(start + absl::Seconds(3)), 0.05), Admission::kYes);
  EXPECT_EQ(endpoint(0).Admit(At(start + absl::Seconds(3)), 0.95), Admission::kYes);
  // Tick makes it healthy once the ramp is over, not before.
  health_->Tick(At(start + absl::Seconds(2)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kRecovering);
  health_->Tick(At(start + absl::Seconds(3)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);
  EXPECT_EQ(endpoint(0).Admit(At(start + absl::Seconds(3)), 0.99), Admission::kYes);
}

TEST_F(UpstreamHealthTest, FailureWhileRecoveringEjectsAgain) {
  options_.eject_consecutive_failures = 5;
  Make();
  EjectByProbes(endpoint(0), At(absl::ZeroDuration()));
  ProbeOk(endpoint(0), At(absl::Seconds(1)));
  ProbeOk(endpoint(0), At(absl::Seconds(2)));
  ASSERT_EQ(endpoint(0).state(), EndpointState::kRecovering);
  Fail(endpoint(0), At(absl::Milliseconds(2100)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kEjected);
  EXPECT_NE(endpoint(0).Status().ejected_reason.find("failed while recovering"), std::string::npos);
  // And it stays out min_ejection from the new ejection, whatever the probes say.
  ProbeOk(endpoint(0), At(absl::Milliseconds(2500)));
  ProbeOk(endpoint(0), At(absl::Milliseconds(2600)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kEjected);
  EXPECT_EQ(endpoint(0).Admit(At(absl::Milliseconds(2600)), 0.0), Admission::kNo);
  ProbeOk(endpoint(0), At(absl::Milliseconds(3100)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kRecovering);
}

TEST_F(UpstreamHealthTest, LagBeyondMaxSlotLagEjectsAtTickAndRecoveryWaitsForHalfOfIt) {
  options_.max_slot_lag = 50;
  Make();
  auto probe = [&](absl::Duration at, Slot behind) {
    ProbeOk(endpoint(1), At(at), 1000);
    ProbeOk(endpoint(0), At(at), 1000 - behind);
    health_->Tick(At(at));
  };
  probe(absl::ZeroDuration(), 50);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);  // at the limit, not beyond
  probe(absl::Milliseconds(100), 51);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kEjected);
  EXPECT_EQ(endpoint(0).Status().lag, 51u);
  EXPECT_EQ(health_->best_slot(), 1000u);
  // Good probes well after min_ejection, but 26 slots behind: still out.
  for (int i = 0; i < 4; ++i) probe(absl::Seconds(2 + i), 26);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kEjected);
  // Within half the lag: back once a probe sees it.
  probe(absl::Seconds(6), 25);
  ProbeOk(endpoint(0), At(absl::Seconds(7)), 975);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kRecovering);
}

TEST_F(UpstreamHealthTest, CircuitOpensOnFailureRateAndStaysOpen) {
  options_.eject_consecutive_failures = 100;
  options_.min_requests = 1000;
  options_.circuit_min_requests = 4;
  options_.circuit_failure_rate = 0.5;
  options_.circuit_open = absl::Seconds(5);
  Make();
  const auto t = At(absl::ZeroDuration());
  Succeed(endpoint(0), t);
  Fail(endpoint(0), t);
  Succeed(endpoint(0), t);
  EXPECT_EQ(endpoint(0).circuit(), CircuitState::kClosed);  // 3 requests: too few
  Fail(endpoint(0), t);
  EXPECT_EQ(endpoint(0).circuit(), CircuitState::kOpen);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);  // the circuit is not ejection
  EXPECT_EQ(endpoint(0).Admit(t + milliseconds(4999), 0.0), Admission::kNo);
  EXPECT_EQ(
      Value(
          R"(switchyard_upstream_endpoint_circuit_opens_total{target="base",endpoint="http://node0:8899"})"),
      1);
}

TEST_F(UpstreamHealthTest, HalfOpenCircuitLetsExactlyTheTrialsThroughAndClosesWhenTheySucceed) {
  options_.eject_consecutive_failures = 100;
  options_.min_requests = 1000;
  options_.circuit_min_requests = 2;
  options_.circuit_open = absl::Seconds(5);
  options_.half_open_trials = 3;
  Make();
  Fail(endpoint(0), At(absl::ZeroDuration()));
  Fail(endpoint(0), At(absl::ZeroDuration()));
  ASSERT_EQ(endpoint(0).circuit(), CircuitState::kOpen);
  const auto half_open = At(absl::Seconds(5));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(endpoint(0).Admit(half_open, 0.0), Admission::kTrial) << i;
    endpoint(0).Begin();
  }
  EXPECT_EQ(endpoint(0).circuit(), CircuitState::kHalfOpen);
  EXPECT_EQ(endpoint(0).Admit(half_open, 0.0), Admission::kNo);
  for (int i = 0; i < 2; ++i) {
    endpoint(0).End(ExchangeOutcome::kOk, milliseconds(1), true, half_open);
    EXPECT_EQ(endpoint(0).circuit(), CircuitState::kHalfOpen);
  }
  endpoint(0).End(ExchangeOutcome::kOk, milliseconds(1), true, half_open);
  EXPECT_EQ(endpoint(0).circuit(), CircuitState::kClosed);
  EXPECT_EQ(endpoint(0).Admit(half_open, 0.99), Admission::kYes);
}

TEST_F(UpstreamHealthTest, FailedTrialOpensTheCircuitAgain) {
  options_.eject_consecutive_failures = 100;
  options_.min_requests = 1000;
  options_.circuit_min_requests = 2;
  options_.circuit_open = absl::Seconds(5);
  options_.half_open_trials = 3;
  Make();
  Fail(endpoint(0), At(absl::ZeroDuration()));
  Fail(endpoint(0), At(absl::ZeroDuration()));
  ASSERT_EQ(endpoint(0).Admit(At(absl::Seconds(5)), 0.0), Admission::kTrial);
  Fail(endpoint(0), At(absl::Seconds(5)), /*trial=*/true);
  EXPECT_EQ(endpoint(0).circuit(), CircuitState::kOpen);
  // Open for circuit_open again, from the failed trial.
  EXPECT_EQ(endpoint(0).Admit(At(absl::Seconds(9)), 0.0), Admission::kNo);
  EXPECT_EQ(endpoint(0).Admit(At(absl::Seconds(10)), 0.0), Admission::kTrial);
  EXPECT_EQ(
      Value(
          R"(switchyard_upstream_endpoint_circuit_opens_total{target="base",endpoint="http://node0:8899"})"),
      2);
}

TEST_F(UpstreamHealthTest, AvoidUntilBlocksAdmitUntilThen) {
  Make();
  endpoint(0).AvoidUntil(At(absl::Seconds(2)));
  EXPECT_EQ(endpoint(0).Admit(At(absl::ZeroDuration()), 0.0), Admission::kNo);
  EXPECT_EQ(endpoint(0).Admit(At(absl::Milliseconds(1999)), 0.0), Admission::kNo);
  EXPECT_EQ(endpoint(0).Admit(At(absl::Seconds(2)), 0.0), Admission::kYes);
  EXPECT_EQ(endpoint(1).Admit(At(absl::ZeroDuration()), 0.0), Admission::kYes);
}

TEST_F(UpstreamHealthTest, HedgeDelayIsThePercentile95OfTheSamplesAfterTick) {
  options_.hedge_min_delay = absl::Milliseconds(5);
  Make();
  const auto t = At(absl::ZeroDuration());
  for (int i = 0; i < 90; ++i) Exchange(endpoint(0), ExchangeOutcome::kOk, t, milliseconds(1));
  for (int i = 0; i < 10; ++i) Exchange(endpoint(0), ExchangeOutcome::kOk, t, milliseconds(40));
  EXPECT_EQ(endpoint(0).hedge_delay(), HealthClock::duration::zero());  // not before Tick
  health_->Tick(t);
  // The 95th of 100 samples is one of the 40 ms ones (to its quarter-octave bucket's bound).
  EXPECT_GE(endpoint(0).hedge_delay(), milliseconds(40));
  EXPECT_LT(endpoint(0).hedge_delay(), milliseconds(47));
  // The samples count for two intervals, then age out: new ones set a new p95.
  health_->Tick(t + std::chrono::seconds(1));
  EXPECT_GE(endpoint(0).hedge_delay(), milliseconds(40));
  health_->Tick(t + std::chrono::seconds(2));
  for (int i = 0; i < 30; ++i) Exchange(endpoint(0), ExchangeOutcome::kOk, t, milliseconds(8));
  health_->Tick(t + std::chrono::seconds(3));
  EXPECT_GE(endpoint(0).hedge_delay(), milliseconds(8));
  EXPECT_LT(endpoint(0).hedge_delay(), milliseconds(10));
}

TEST_F(UpstreamHealthTest, HedgeDelayIsAtLeastHedgeMinDelay) {
  options_.hedge_min_delay = absl::Milliseconds(5);
  Make();
  const auto t = At(absl::ZeroDuration());
  for (int i = 0; i < 50; ++i) {
    Exchange(endpoint(0), ExchangeOutcome::kOk, t, std::chrono::microseconds(100));
  }
  health_->Tick(t);
  EXPECT_EQ(endpoint(0).hedge_delay(), milliseconds(5));
}

TEST_F(UpstreamHealthTest, TooFewSamplesKeepTheLastHedgeDelayOrTheFirstOne) {
  Make();
  EXPECT_EQ(endpoint(0).hedge_delay(), HealthClock::duration::zero());  // before any tick
  const auto t = At(absl::ZeroDuration());
  for (int i = 0; i < 19; ++i) Exchange(endpoint(0), ExchangeOutcome::kOk, t, milliseconds(10));
  health_->Tick(t);
  // No p95 yet: the first hedge delay, 50 ms.
  EXPECT_EQ(endpoint(0).hedge_delay(), milliseconds(50));
  EXPECT_EQ(endpoint(1).hedge_delay(), milliseconds(50));
  Exchange(endpoint(0), ExchangeOutcome::kOk, t, milliseconds(10));
  health_->Tick(t + std::chrono::seconds(1));
  const auto p95 = endpoint(0).hedge_delay();
  EXPECT_GE(p95, milliseconds(10));
  EXPECT_LT(p95, milliseconds(20));
  // The endpoint stops answering: two intervals without samples keep its last p95, so the
  // reads it holds are still hedged.
  health_->Tick(t + std::chrono::seconds(2));
  health_->Tick(t + std::chrono::seconds(3));
  EXPECT_EQ(endpoint(0).hedge_delay(), p95);
}

TEST_F(UpstreamHealthTest, FixedHedgeDelayIsUsedAsIs) {
  options_.hedge_delay = absl::Milliseconds(20);
  Make();
  EXPECT_EQ(endpoint(0).hedge_delay(), milliseconds(20));
  const auto t = At(absl::ZeroDuration());
  for (int i = 0; i < 100; ++i) Exchange(endpoint(0), ExchangeOutcome::kOk, t, milliseconds(200));
  health_->Tick(t);
  EXPECT_EQ(endpoint(0).hedge_delay(), milliseconds(20));
  EXPECT_EQ(endpoint(1).hedge_delay(), milliseconds(20));
}

TEST_F(UpstreamHealthTest, ProbeRoundTripsBringTheLatencyOfAnEndpointWithoutTrafficDown) {
  Make();
  EndpointHealth& e = endpoint(0);
  // One slow spell: the EWMA says 100 ms, and the choice would stop sending reads here.
  Exchange(e, ExchangeOutcome::kOk, At(absl::ZeroDuration()), milliseconds(100));
  EXPECT_DOUBLE_EQ(e.latency_us(), 100'000);
  // The first probe after live traffic does not count (the live sample is newer); the probes of
  // an endpoint nobody reads from do, each one like a live sample.
  e.OnProbe(Slot{1000}, true, At(absl::Milliseconds(200)), milliseconds(1));
  EXPECT_DOUBLE_EQ(e.latency_us(), 100'000);
  double last = e.latency_us();
  for (int i = 2; i < 40; ++i) {
    e.OnProbe(Slot{1000}, true, At(absl::Milliseconds(200 * i)), milliseconds(1));
    EXPECT_LT(e.latency_us(), last);
    last = e.latency_us();
  }
  EXPECT_LT(e.latency_us(), 1'100);
  // A failed probe is no sample, and live traffic takes over again.
  e.OnProbe(absl::UnavailableError("down"), false, At(absl::Seconds(9)), milliseconds(500));
  EXPECT_DOUBLE_EQ(e.latency_us(), last);
  Exchange(e, ExchangeOutcome::kOk, At(absl::Seconds(10)), milliseconds(2));
  const double live = e.latency_us();
  e.OnProbe(Slot{1000}, true, At(absl::Seconds(10)), milliseconds(50));
  EXPECT_DOUBLE_EQ(e.latency_us(), live);
}

TEST_F(UpstreamHealthTest, RetryBudgetIsTheMinimumWithFewRequestsInFlight) {
  options_.retry_budget_min = 3;
  options_.retry_budget_ratio = 0.2;
  Make();
  for (int i = 0; i < 5; ++i) health_->BeginRequest();
  EXPECT_TRUE(health_->TryBeginRetry(0));
  EXPECT_TRUE(health_->TryBeginRetry(0));
  EXPECT_TRUE(health_->TryBeginRetry(0));
  EXPECT_FALSE(health_->TryBeginRetry(0));
  EXPECT_EQ(Value(R"(switchyard_upstream_retry_budget_exhausted_total{target="base"})"), 1);
  health_->EndRetry();
  EXPECT_TRUE(health_->TryBeginRetry(0));
  EXPECT_FALSE(health_->TryBeginRetry(0));
  EXPECT_EQ(Value(R"(switchyard_upstream_retry_budget_exhausted_total{target="base"})"), 2);
}

TEST_F(UpstreamHealthTest, RetryBudgetIsTheRatioOfRequestsInFlight) {
  options_.retry_budget_min = 3;
  options_.retry_budget_ratio = 0.2;
  Make();
  for (int i = 0; i < 100; ++i) health_->BeginRequest();
  int allowed = 0;
  while (health_->TryBeginRetry(0) && allowed < 1000) ++allowed;
  EXPECT_EQ(allowed, 20);
}

TEST_F(UpstreamHealthTest, NoRetryBudgetAllowsNoRetry) {
  options_.retry_budget_min = 0;
  options_.retry_budget_ratio = 0;
  Make();
  for (int i = 0; i < 100; ++i) health_->BeginRequest();
  EXPECT_FALSE(health_->TryBeginRetry(0));
}

TEST_F(UpstreamHealthTest, ValidateHealthOptionsNamesTheKey) {
  EXPECT_TRUE(ValidateHealthOptions(UpstreamHealthOptions{}).ok());
  struct Case {
    std::string key;
    std::function<void(UpstreamHealthOptions&)> spoil;
  };
  const std::vector<Case> cases = {
      {"probe_interval_ms", [](auto& o) { o.probe_interval = absl::Milliseconds(1); }},
      {"eject_consecutive_failures", [](auto& o) { o.eject_consecutive_failures = 0; }},
      {"eject_error_rate", [](auto& o) { o.eject_error_rate = 0; }},
      {"eject_error_rate", [](auto& o) { o.eject_error_rate = 1.5; }},
      {"window_ms", [](auto& o) { o.window = absl::Milliseconds(10); }},
      {"circuit_window_ms", [](auto& o) { o.circuit_window = absl::Milliseconds(10); }},
      {"circuit_failure_rate", [](auto& o) { o.circuit_failure_rate = -1; }},
      {"half_open_trials", [](auto& o) { o.half_open_trials = 0; }},
      {"recover_probes", [](auto& o) { o.recover_probes = 0; }},
      {"latency_decay", [](auto& o) { o.latency_decay = 0; }},
      {"max_attempts", [](auto& o) { o.max_attempts = 0; }},
      {"max_attempts", [](auto& o) { o.max_attempts = 11; }},
      {"retry_budget_ratio", [](auto& o) { o.retry_budget_ratio = 2; }},
      {"hedge_delay_ms", [](auto& o) { o.hedge_delay = absl::Milliseconds(-1); }},
      {"hedge_min_delay_ms", [](auto& o) { o.hedge_min_delay = absl::Milliseconds(-1); }},
      {"min_ejection_ms", [](auto& o) { o.min_ejection = absl::Milliseconds(-1); }},
      {"ramp_up_ms", [](auto& o) { o.ramp_up = absl::Milliseconds(-1); }},
      {"circuit_open_ms", [](auto& o) { o.circuit_open = absl::Milliseconds(-1); }},
  };
  for (const Case& c : cases) {
    UpstreamHealthOptions options;
    c.spoil(options);
    const absl::Status status = ValidateHealthOptions(options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_NE(status.message().find("upstream_health." + c.key), std::string::npos)
        << c.key << ": " << status;
  }
}

TEST_F(UpstreamHealthTest, WithoutProbesAnEjectedEndpointComesBackAfterMinEjection) {
  options_.eject_consecutive_failures = 2;
  options_.min_ejection = absl::Seconds(1);
  Make();
  Fail(endpoint(0), At(absl::ZeroDuration()));
  Fail(endpoint(0), At(absl::ZeroDuration()));
  ASSERT_EQ(endpoint(0).state(), EndpointState::kEjected);
  EXPECT_EQ(endpoint(0).Admit(At(absl::Milliseconds(999)), 0.0), Admission::kNo);
  EXPECT_EQ(endpoint(0).Admit(At(absl::Seconds(1)), 0.05), Admission::kYes);
  EXPECT_EQ(endpoint(0).state(), EndpointState::kRecovering);
  EXPECT_EQ(endpoint(0).Admit(At(absl::Seconds(1)), 0.95), Admission::kNo);  // the ramp's start
}

TEST_F(UpstreamHealthTest, EndpointBackWithoutProbesStartsWithACleanRecord) {
  options_.eject_consecutive_failures = 3;
  options_.min_ejection = absl::Seconds(1);
  options_.ramp_up = absl::Seconds(1);
  Make();
  for (int i = 0; i < 3; ++i) Fail(endpoint(0), At(absl::ZeroDuration()));
  ASSERT_EQ(endpoint(0).state(), EndpointState::kEjected);
  ASSERT_EQ(endpoint(0).Admit(At(absl::Seconds(1)), 0.0), Admission::kYes);
  health_->Tick(At(absl::Seconds(2)));
  ASSERT_EQ(endpoint(0).state(), EndpointState::kHealthy);
  // One failure is one failure, not the fourth in a row: the ejection's failures are over.
  Fail(endpoint(0), At(absl::Seconds(2)));
  EXPECT_EQ(endpoint(0).state(), EndpointState::kHealthy);
}

}  // namespace
}  // namespace switchyard
