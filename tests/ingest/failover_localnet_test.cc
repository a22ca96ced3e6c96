// Failover between two endpoints of one chain: a switchyard-localnet reached directly and
// through a FaultProxy pair (its HTTP port and its WebSocket port, HTTP + 1). The watcher
// starts on the proxied endpoint; the proxies then go bad. The watcher must move to the other
// endpoint through a StreamGap and a Resynced, and the folded state must equal the localnet's
// ground truth.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <functional>
#include <thread>

#include "engine/event_codec.h"
#include "engine/fold_runner.h"
#include "ingest/watcher.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/fault_proxy.h"
#include "tests/support/localnet_process.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::Fault;
using testing::FaultMode;
using testing::FaultProxy;

Fault WithMode(FaultMode mode) {
  Fault fault;
  fault.mode = mode;
  return fault;
}

// Waits up to `limit` (scaled under a sanitizer, where the localnet's slots come slower).
bool WaitFor(const std::function<bool()>& condition, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit * testing::kTimeScale;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The gap and resync markers in the log, in log order.
struct Marker {
  bool gap = false;  // else Resynced
  Slot slot = 0;
};

class FailoverLocalnetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net_ = testing::StartLocalnetProcess(
        SWITCHYARD_LOCALNET_BINARY, dir_.Sub("ready.json"),
        {"--slot-ms", "10", "--seed", "5", "--accounts", "80", "--delegate-rate", "2",
         "--undelegate-rate", "1", "--scenario-er-count", "3", "--ground-truth",
         dir_.Sub("truth.jsonl")});
    ASSERT_NE(net_.http_port, 0) << "localnet did not start";
    const std::string http = "http://127.0.0.1:" + std::to_string(net_.http_port);
    auto http_proxy = FaultProxy::Start(http);
    auto ws_proxy = FaultProxy::Start("http://127.0.0.1:" + std::to_string(net_.http_port + 1));
    ASSERT_TRUE(http_proxy.ok()) << http_proxy.status();
    ASSERT_TRUE(ws_proxy.ok()) << ws_proxy.status();
    http_proxy_ = *std::move(http_proxy);
    ws_proxy_ = *std::move(ws_proxy);
    auto log = EmbeddedEventLog::Open(dir_.Sub("log"));
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = *std::move(log);

    // Endpoint 0 through the proxies (its pubsub given, since the proxies' ports are not
    // HTTP and HTTP + 1), endpoint 1 directly.
    options_.endpoints = {
        {http_proxy_->url(), "ws://127.0.0.1:" + std::to_string(ws_proxy_->port())}, {http, ""}};
    options_.request_timeout = absl::Seconds(1);
    options_.silence_timeout = absl::Milliseconds(1500);
    options_.reconnect_min = absl::Milliseconds(50);
    options_.reconnect_max = absl::Milliseconds(500);
    options_.read_attempts = 2;
    options_.read_backoff_min = absl::Milliseconds(20);
    options_.probe_interval = absl::Milliseconds(200);
  }
  void TearDown() override {
    if (net_.pid != 0) {
      kill(net_.pid, SIGTERM);
      testing::WaitProcess(net_.pid);
    }
  }

  // Runs the watcher on endpoint 0 until it sealed `healthy_until`, applies `fault` to the
  // proxies, and runs it until it follows endpoint 1 and sealed 150 slots past its resync
  // there; then runs `after_move`, if any, before it stops everything.
  void RunAndFault(Slot healthy_until, const std::function<void()>& fault,
                   const std::function<void()>& after_move = nullptr) {
    watcher_ = std::make_unique<BaseLayerWatcher>(
        options_, log_.get(), std::map<Pubkey, AccountState>{}, &clock_, &metrics_);
    ASSERT_TRUE(watcher_->Start().ok());
    ASSERT_TRUE(WaitFor([&] { return watcher_->last_sealed_slot() >= healthy_until; },
                        std::chrono::seconds(15)))
        << "sealed only " << watcher_->last_sealed_slot();
    EXPECT_EQ(watcher_->active_endpoint(), 0u);
    EXPECT_EQ(metrics_.failovers_dead.value() + metrics_.failovers_lag.value(), 0u);
    sealed_at_fault_ = watcher_->last_sealed_slot();
    fault();
    const auto fault_time = std::chrono::steady_clock::now();
    EXPECT_TRUE(
        WaitFor([&] { return watcher_->active_endpoint() == 1; }, std::chrono::seconds(20)));
    time_to_failover_ = std::chrono::steady_clock::now() - fault_time;
    const bool moved = WaitFor(
        [&] {
          return watcher_->active_endpoint() == 1 &&
                 watcher_->last_resync_slot() > sealed_at_fault_ &&
                 watcher_->last_sealed_slot() >= watcher_->last_resync_slot() + 150;
        },
        std::chrono::seconds(20));
    if (moved && after_move) after_move();
    watcher_->Stop();
    kill(net_.pid, SIGTERM);
    EXPECT_EQ(testing::WaitProcess(net_.pid), 0);
    net_.pid = 0;
    ASSERT_TRUE(moved) << "active endpoint " << watcher_->active_endpoint() << ", resynced at "
                       << watcher_->last_resync_slot() << ", sealed "
                       << watcher_->last_sealed_slot() << ", fault at " << sealed_at_fault_;
  }

  // The log's gap and resync markers after the fault, and the folded state against the
  // ground truth.
  void ExpectGapThenResyncAndTheGroundTruth() {
    std::vector<Marker> markers;
    auto scan = log_->NewReader();
    for (;;) {
      auto n = scan->Poll(10'000, absl::ZeroDuration(), [&](const LogRecordView& r) {
        auto event = DecodeEvent(r.payload);
        if (!event.ok()) return;
        if (std::holds_alternative<StreamGapEvent>(*event))
          markers.push_back({true, SlotOf(*event)});
        if (std::holds_alternative<ResyncedEvent>(*event))
          markers.push_back({false, SlotOf(*event)});
      });
      if (!n.ok() || *n == 0) break;
    }
    // The backfill's Resynced, then (at least) one gap at or after the fault and a Resynced
    // after it at a later slot: the switch went through the lost-stream path.
    ASSERT_GE(markers.size(), 3u);
    EXPECT_FALSE(markers.front().gap);
    size_t first_gap = 0;
    while (first_gap < markers.size() && !markers[first_gap].gap) ++first_gap;
    ASSERT_LT(first_gap, markers.size()) << "no StreamGap in the log";
    EXPECT_GE(markers[first_gap].slot, sealed_at_fault_);
    EXPECT_FALSE(markers.back().gap) << "the log ends in a gap";
    EXPECT_GT(markers.back().slot, markers[first_gap].slot);

    auto store = RocksDbStateStore::Open(dir_.Sub("state"));
    ASSERT_TRUE(store.ok());
    auto reader = log_->NewReader();
    SnapshotHolder snapshots;
    FoldRunner runner(FoldRunnerOptions(), reader.get(), store->get(), &snapshots, &clock_);
    ASSERT_TRUE(runner.Init().ok());
    ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
    auto snapshot = snapshots.Current();
    EXPECT_EQ(snapshot->applied_slot(), watcher_->last_sealed_slot());
    EXPECT_FALSE(snapshot->limbo_since().has_value()) << "still in limbo after the resync";
    EXPECT_GE(runner.fold().position().counters.stream_gaps, 1u);
    EXPECT_GE(runner.fold().position().counters.resyncs, 2u);
    const auto truth = testing::GroundTruthAt(dir_.Sub("truth.jsonl"), snapshot->applied_slot());
    EXPECT_FALSE(truth.empty());
    EXPECT_EQ(snapshot->delegated_count(), truth.size()) << "at slot " << snapshot->applied_slot();
    for (const auto& [account, authority] : truth) {
      const auto found = snapshot->FindDelegation(account);
      EXPECT_TRUE(found.has_value()) << account.ToBase58();
      if (found) {
        EXPECT_EQ(found->validator, authority) << account.ToBase58();
      }
    }
  }

  testing::TempDir dir_;
  testing::LocalnetProcess net_;
  std::unique_ptr<FaultProxy> http_proxy_;
  std::unique_ptr<FaultProxy> ws_proxy_;
  std::unique_ptr<EmbeddedEventLog> log_;
  SystemClock clock_;
  MetricsRegistry registry_;
  WatcherMetrics metrics_{registry_};
  WatcherOptions options_;
  std::unique_ptr<BaseLayerWatcher> watcher_;
  Slot sealed_at_fault_ = 0;
  std::chrono::steady_clock::duration time_to_failover_{};
};

// Both proxies of the active endpoint stop answering (a stopped node): the probes see it stop
// answering while the other advances, and the watcher moves for "dead" well before its reads
// (8 attempts of 1 s) or its stream's silence (10 s) would have ended the session.
//
// Once endpoint 0 answers again, the watcher stays on endpoint 1 (no return to the first).
TEST_F(FailoverLocalnetTest, BlackHoledActiveEndpointFailsOverAsDeadThroughAGapAndResync) {
  options_.read_attempts = 8;
  options_.silence_timeout = absl::Seconds(10);
  uint64_t gaps_before_recovery = 0;
  RunAndFault(
      100,
      [&] {
        http_proxy_->Set(WithMode(FaultMode::kBlackHole));
        ws_proxy_->Set(WithMode(FaultMode::kBlackHole));
      },
      [&] {
        gaps_before_recovery = metrics_.stream_gaps.value();
        http_proxy_->Set(WithMode(FaultMode::kPass));
        ws_proxy_->Set(WithMode(FaultMode::kPass));
        // Endpoint 0 probes healthy again, then 200 more slots (2 s, five probe rounds or
        // more) pass.
        const int64_t recovered_above = metrics_.ProbedSlot(1).value();
        EXPECT_TRUE(WaitFor([&] { return metrics_.ProbedSlot(0).value() > recovered_above; },
                            std::chrono::seconds(10)));
        const int64_t then = metrics_.ProbedSlot(1).value();
        EXPECT_TRUE(WaitFor([&] { return metrics_.ProbedSlot(1).value() > then + 200; },
                            std::chrono::seconds(10)));
        EXPECT_EQ(watcher_->active_endpoint(), 1u);
        EXPECT_EQ(metrics_.stream_gaps.value(), gaps_before_recovery);
      });
  EXPECT_EQ(watcher_->active_endpoint(), 1u);
  EXPECT_EQ(metrics_.active_endpoint.value(), 1);
  EXPECT_GE(metrics_.failovers_dead.value(), 1u);
  EXPECT_EQ(metrics_.failovers_lag.value(), 0u);
  EXPECT_GT(metrics_.ProbedSlot(1).value(), static_cast<int64_t>(sealed_at_fault_));
  EXPECT_LT(time_to_failover_, std::chrono::seconds(5));
  ExpectGapThenResyncAndTheGroundTruth();
}

// The same without the probes (one round a minute): the silent stream, its failed reconnect or
// the failing reads alone make the watcher move.
TEST_F(FailoverLocalnetTest, BlackHoledActiveEndpointFailsOverWithoutProbes) {
  options_.probe_interval = absl::Seconds(60);
  RunAndFault(100, [&] {
    http_proxy_->Set(WithMode(FaultMode::kBlackHole));
    ws_proxy_->Set(WithMode(FaultMode::kBlackHole));
  });
  EXPECT_EQ(watcher_->active_endpoint(), 1u);
  EXPECT_GE(metrics_.failovers_dead.value(), 1u);
  EXPECT_EQ(metrics_.failovers_lag.value(), 0u);
  EXPECT_EQ(metrics_.ProbedSlot(1).value(), 0) << "no probe round should have run";
  ExpectGapThenResyncAndTheGroundTruth();
}

// The active endpoint's JSON-RPC reports every slot 200 behind (a node that fell behind; its
// stream still flows): the probes see it more than max_lag_slots behind the other endpoint.
TEST_F(FailoverLocalnetTest, LaggingActiveEndpointFailsOverForLag) {
  RunAndFault(300, [&] {
    Fault lag = WithMode(FaultMode::kLag);
    lag.lag_slots = 200;
    http_proxy_->Set(lag);
  });
  EXPECT_EQ(watcher_->active_endpoint(), 1u);
  EXPECT_EQ(metrics_.failovers_lag.value(), 1u);
  EXPECT_EQ(metrics_.failovers_dead.value(), 0u);
  EXPECT_GE(metrics_.ProbedSlot(1).value() - metrics_.ProbedSlot(0).value(), 150);
  ExpectGapThenResyncAndTheGroundTruth();
}

}  // namespace
}  // namespace switchyard
