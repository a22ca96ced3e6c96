// ProbeLoop: rounds on a thread of their own, repeated at the interval until Stop, and the
// pools' callbacks after Stop told that the loop is stopping.
#include "api/upstream/probe_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "api/metrics/api_metrics.h"
#include "common/metrics.h"
#include "tests/api/fake_upstream.h"

namespace switchyard {
namespace {

using api_test::FakeReply;
using api_test::FakeUpstream;

class ProbeLoopTest : public ::testing::Test {
 protected:
  std::unique_ptr<UpstreamSet> Pools(ProbeLoop& loop, std::vector<UpstreamTarget> targets) {
    UpstreamOptions options;
    options.request_timeout = absl::Seconds(30);  // a hung request ends by Stop, not by this
    options.request_deadline = absl::Seconds(30);
    auto set = UpstreamSet::Create(loop.io_context(), targets, options, nullptr, &metrics_);
    EXPECT_TRUE(set.ok()) << set.status();
    return set.ok() ? *std::move(set) : nullptr;
  }

  MetricsRegistry registry_;
  ApiMetrics metrics_{registry_};
};

TEST_F(ProbeLoopTest, RoundsRunOnTheLoopsThreadAtTheIntervalUntilStop) {
  ProbeLoop loop;
  std::atomic<int> rounds{0};
  std::atomic<bool> on_caller_thread{false};
  const std::thread::id caller = std::this_thread::get_id();
  const absl::Time start = absl::Now();
  loop.Start(Pools(loop, {}), absl::Milliseconds(20), [&] {
    if (std::this_thread::get_id() == caller) on_caller_thread = true;
    ++rounds;
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (rounds.load() < 5 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_GE(rounds.load(), 5);
  // Five rounds are four intervals apart at least.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(80));
  EXPECT_FALSE(on_caller_thread.load());

  loop.Stop();
  const int after_stop = rounds.load();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(rounds.load(), after_stop) << "a round ran after Stop returned";
  loop.Stop();  // a second Stop does nothing
}

TEST_F(ProbeLoopTest, ARequestOutAtStopEndsAndItsCallbackSeesTheLoopStopping) {
  FakeUpstream upstream("hung");
  upstream.SetResponder(
      [](const std::string&, const std::string&) { return FakeReply{FakeReply::Action::kHang}; });
  ProbeLoop loop;
  absl::Notification answered;
  std::optional<bool> stopping_seen;
  std::optional<bool> ok_seen;
  std::atomic<int> rounds{0};
  loop.Start(Pools(loop, {{"hung", {{upstream.url()}}}}), absl::Hours(1), [&] {
    ++rounds;
    loop.upstreams().Send("hung", R"({"jsonrpc":"2.0","id":1,"method":"getSlot"})",
                          SendOptions(RetryPolicy::kNever),
                          [&](absl::StatusOr<UpstreamResponse> response) {
                            stopping_seen = loop.stopping();
                            ok_seen = response.ok();
                            answered.Notify();
                          });
  });
  ASSERT_TRUE(upstream.WaitForRequests(1));
  EXPECT_FALSE(answered.HasBeenNotified());
  loop.Stop();  // returns only once the hung request has ended
  ASSERT_TRUE(answered.HasBeenNotified());
  EXPECT_EQ(stopping_seen, std::optional<bool>(true));
  EXPECT_EQ(ok_seen, std::optional<bool>(false));
  EXPECT_EQ(rounds.load(), 1);
}

TEST_F(ProbeLoopTest, StopBeforeStartDoesNothing) {
  ProbeLoop loop;
  loop.Stop();
  EXPECT_FALSE(loop.stopping());
}

}  // namespace
}  // namespace switchyard
