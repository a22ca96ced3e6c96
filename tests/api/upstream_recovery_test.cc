#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "api/metrics/api_metrics.h"
#include "api/upstream/upstream.h"
#include "api/upstream/upstream_health.h"
#include "common/metrics.h"
#include "tests/api/fake_upstream.h"

namespace switchyard {
namespace {

using api_test::FakeUpstream;
using namespace std::chrono_literals;

// Two endpoints that recover at once (no minimum ejection) and ramp for a minute.
UpstreamHealthOptions RecoveryOptions() {
  UpstreamHealthOptions options;
  options.min_ejection = absl::ZeroDuration();
  options.recover_probes = 1;
  options.ramp_up = absl::Seconds(60);
  return options;
}

void Fail(EndpointHealth& endpoint, ExchangeOutcome outcome, HealthClock::time_point now) {
  endpoint.Begin();
  endpoint.End(outcome, 1ms, false, now);
}

// Ejects endpoint `i` with failures in a row and, when `recover`, brings it back with a probe.
void EjectAndRecover(TargetHealth& target, size_t i, bool recover, HealthClock::time_point now) {
  EndpointHealth& endpoint = target.endpoint(i);
  for (uint32_t k = 0; k < target.options().eject_consecutive_failures; ++k) {
    Fail(endpoint, ExchangeOutcome::kServerError, now);
  }
  ASSERT_EQ(endpoint.state(), EndpointState::kEjected);
  endpoint.OnProbe(recover ? absl::StatusOr<Slot>(100) : absl::UnavailableError("down"), recover,
                   now);
  ASSERT_EQ(endpoint.state(), recover ? EndpointState::kRecovering : EndpointState::kEjected);
}

UpstreamTarget TwoEndpoints(const std::string& a, const std::string& b) {
  return UpstreamTarget{"base", {{a, 1}, {b, 1}}};
}

TEST(UpstreamRecoveryTest, LostHedgeWhileRecoveringDoesNotEjectAgain) {
  MetricsRegistry registry;
  const UpstreamHealthOptions options = RecoveryOptions();
  TargetHealth target(TwoEndpoints("http://127.0.0.1:1", "http://127.0.0.1:2"), options, &registry);
  const auto now = HealthClock::now();
  EjectAndRecover(target, 0, /*recover=*/true, now);

  // Losing a race to the other endpoint now and then is no reason to leave again.
  Fail(target.endpoint(0), ExchangeOutcome::kLostHedge, now);
  EXPECT_EQ(target.endpoint(0).state(), EndpointState::kRecovering);
  target.endpoint(0).Begin();
  target.endpoint(0).End(ExchangeOutcome::kOk, 1ms, false, now);
  // Losing every race is: as for a healthy endpoint, after K in a row.
  for (uint32_t k = 0; k + 1 < options.eject_consecutive_failures; ++k) {
    Fail(target.endpoint(0), ExchangeOutcome::kLostHedge, now);
  }
  EXPECT_EQ(target.endpoint(0).state(), EndpointState::kRecovering);
  Fail(target.endpoint(0), ExchangeOutcome::kLostHedge, now);
  EXPECT_EQ(target.endpoint(0).state(), EndpointState::kEjected);
}

TEST(UpstreamRecoveryTest, FailureOtherThanALostHedgeWhileRecoveringEjectsAgain) {
  MetricsRegistry registry;
  const UpstreamHealthOptions options = RecoveryOptions();
  TargetHealth target(TwoEndpoints("http://127.0.0.1:1", "http://127.0.0.1:2"), options, &registry);
  const auto now = HealthClock::now();
  EjectAndRecover(target, 0, /*recover=*/true, now);
  Fail(target.endpoint(0), ExchangeOutcome::kServerError, now);
  EXPECT_EQ(target.endpoint(0).state(), EndpointState::kEjected);
}

// A recovering endpoint whose partner is ejected is the only one that can answer: its ramp
// must not turn requests away with "no endpoint can take the request".
TEST(UpstreamRecoveryTest, RecoveringEndpointTakesEveryRequestWhenTheOtherIsEjected) {
  FakeUpstream recovering("recovering");
  FakeUpstream ejected("ejected");
  MetricsRegistry registry;
  ApiMetrics metrics(registry);
  const std::vector<UpstreamTarget> targets = {TwoEndpoints(recovering.url(), ejected.url())};
  UpstreamHealth health(targets, RecoveryOptions(), &registry);
  TargetHealth& target = *health.Find("base");
  const auto now = HealthClock::now();
  EjectAndRecover(target, 0, /*recover=*/true, now);
  EjectAndRecover(target, 1, /*recover=*/false, now);

  boost::asio::io_context io_context;
  UpstreamOptions options;
  auto upstreams = UpstreamSet::Create(io_context, targets, options, nullptr, &metrics, &health);
  ASSERT_TRUE(upstreams.ok()) << upstreams.status();
  constexpr int kRequests = 50;
  int answered = 0;
  std::string first_error;
  for (int i = 0; i < kRequests; ++i) {
    (*upstreams)
        ->Send("base", R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})", RetryPolicy::kSafe,
               [&](absl::StatusOr<UpstreamResponse> response) {
                 if (response.ok() && response->status == 200) {
                   ++answered;
                 } else if (first_error.empty()) {
                   first_error = response.ok() ? response->body : response.status().ToString();
                 }
               });
  }
  io_context.run_for(5s);
  (*upstreams)->Shutdown();
  EXPECT_EQ(answered, kRequests) << first_error;
  EXPECT_EQ(recovering.received_count(), static_cast<size_t>(kRequests));
  EXPECT_EQ(ejected.received_count(), 0u);
}

}  // namespace
}  // namespace switchyard
