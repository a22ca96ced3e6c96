// The watcher against a real base layer: switchyard-localnet's scenario driver makes real
// Delegate and Undelegate transactions; the watcher writes the log; the fold folds it; at the
// last sealed slot the folded delegations must equal the localnet's ground truth.
#include "ingest/watcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "engine/event_codec.h"
#include "engine/fold_runner.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/localnet_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::GroundTruthAt;

testing::LocalnetProcess StartLocalnet(const testing::TempDir& dir,
                                       std::vector<std::string> extra) {
  std::vector<std::string> args = {"--slot-ms",
                                   "10",
                                   "--seed",
                                   "3",
                                   "--accounts",
                                   "80",
                                   "--delegate-rate",
                                   "2",
                                   "--undelegate-rate",
                                   "1",
                                   "--scenario-er-count",
                                   "3",
                                   "--ground-truth",
                                   dir.Sub("truth.jsonl")};
  args.insert(args.end(), extra.begin(), extra.end());
  return testing::StartLocalnetProcess(SWITCHYARD_LOCALNET_BINARY, dir.Sub("ready.json"), args);
}

struct Outcome {
  Slot sealed = 0;
  FoldCounters counters;
  uint64_t corrections = 0;
  uint64_t read_retries = 0;
  uint64_t stale_connections = 0;
};

std::function<bool(const BaseLayerWatcher&)> SealedAtLeast(Slot slot) {
  return [slot](const BaseLayerWatcher& w) { return w.last_sealed_slot() >= slot; };
}

// Runs the watcher until `done`, stops everything, folds the log, and checks the folded
// state against the ground truth at the last sealed slot.
// With `every_sealed_slot`, every 23rd sealed slot is checked as well, by folding the whole
// log up to it. Only without faults: a resync appends corrections that carry older slots,
// and a replay up to an earlier slot then includes them, while the live fold did not.
Outcome WatchAndCompare(std::vector<std::string> localnet_flags, WatcherOptions options,
                        const std::function<bool(const BaseLayerWatcher&)>& done,
                        bool every_sealed_slot = true) {
  testing::TempDir dir;
  testing::LocalnetProcess net = StartLocalnet(dir, std::move(localnet_flags));
  EXPECT_NE(net.http_port, 0) << "localnet did not start";
  if (net.http_port == 0) return {};
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  EXPECT_TRUE(log.ok());
  SystemClock clock;
  MetricsRegistry registry;
  WatcherMetrics metrics(registry);
  options.endpoints = {{"http://127.0.0.1:" + std::to_string(net.http_port), ""}};
  BaseLayerWatcher watcher(options, log->get(), {}, &clock, &metrics);
  EXPECT_TRUE(watcher.Start().ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done(watcher) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  watcher.Stop();
  kill(net.pid, SIGTERM);
  EXPECT_EQ(testing::WaitProcess(net.pid), 0);
  EXPECT_TRUE(done(watcher)) << "the watcher did not get there in time";

  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  FoldRunner runner(FoldRunnerOptions(), reader.get(), store->get(), &snapshots, &clock);
  EXPECT_TRUE(runner.Init().ok());
  EXPECT_TRUE(runner.RunUntilCaughtUp().ok());
  auto snapshot = snapshots.Current();
  EXPECT_EQ(snapshot->applied_slot(), watcher.last_sealed_slot());
  const auto truth = GroundTruthAt(dir.Sub("truth.jsonl"), snapshot->applied_slot());
  EXPECT_FALSE(truth.empty());
  EXPECT_EQ(snapshot->delegated_count(), truth.size()) << "at slot " << snapshot->applied_slot();
  for (const auto& [account, authority] : truth) {
    const auto found = snapshot->FindDelegation(account);
    EXPECT_TRUE(found.has_value()) << account.ToBase58();
    if (found) {
      EXPECT_EQ(found->validator, authority);
    }
  }
  EXPECT_GT(metrics.events_written.value(), 0u);

  // Earlier sealed slots too: the log folded up to S equals the ground truth at S.
  if (!every_sealed_slot) {
    return {watcher.last_sealed_slot(), runner.fold().position().counters,
            metrics.corrections.value(), metrics.read_retries.value(),
            metrics.stale_connections.value()};
  }
  std::vector<Slot> sealed;
  {
    auto scan = (*log)->NewReader();
    for (;;) {
      auto n = scan->Poll(10'000, absl::ZeroDuration(), [&](const LogRecordView& r) {
        auto event = DecodeEvent(r.payload);
        if (event.ok() && std::holds_alternative<SlotSealedEvent>(*event)) {
          sealed.push_back(SlotOf(*event));
        }
      });
      if (!n.ok() || *n == 0) break;
    }
  }
  int checked = 0;
  for (size_t i = 0; i < sealed.size(); i += 23) {
    const Slot s = sealed[i];
    FoldOptions at_slot;
    at_slot.stop_at_slot = s;
    Fold fold(at_slot, LoadedState(), 1);
    auto replay = (*log)->NewReader();
    for (;;) {
      auto n = replay->Poll(10'000, absl::ZeroDuration(),
                            [&](const LogRecordView& r) { fold.Add(0, r.offset, r.payload); });
      if (!n.ok() || *n == 0) break;
    }
    EXPECT_EQ(fold.position().applied_slot, s);
    const auto at = fold.MakeSnapshot();
    const auto expected = GroundTruthAt(dir.Sub("truth.jsonl"), s);
    EXPECT_EQ(at->delegated_count(), expected.size()) << "at sealed slot " << s;
    for (const auto& [account, authority] : expected) {
      const auto found = at->FindDelegation(account);
      EXPECT_TRUE(found && found->validator == authority) << account.ToBase58() << " at " << s;
    }
    ++checked;
  }
  EXPECT_GT(checked, 3);
  return {watcher.last_sealed_slot(), runner.fold().position().counters,
          metrics.corrections.value(), metrics.read_retries.value(),
          metrics.stale_connections.value()};
}

TEST(WatcherTest, FoldedStateEqualsTheGroundTruthAtTheLastSealedSlot) {
  WatcherOptions options;
  const Outcome outcome = WatchAndCompare({}, options, SealedAtLeast(200));
  EXPECT_EQ(outcome.counters.ignored_stale, 0u) << "the watcher wrote events the fold ignored";
  EXPECT_EQ(outcome.counters.stream_gaps, 0u);
  EXPECT_EQ(outcome.counters.resyncs, 1u);  // the backfill
}

TEST(WatcherTest, DroppedWebSocketsWriteAGapAndResyncAndTheStateConverges) {
  WatcherOptions options;
  options.reconnect_min = absl::Milliseconds(50);
  const Outcome outcome =
      WatchAndCompare({"--drop-websockets-at-slot", "80"}, options, SealedAtLeast(250),
                      /*every_sealed_slot=*/false);
  EXPECT_GE(outcome.counters.stream_gaps, 1u);
  EXPECT_GE(outcome.counters.resyncs, 2u);  // the backfill, then after the gap
}

// A base layer that answers some reads 429 (with Retry-After), 503, or cuts the connection:
// each failed read is tried again inside the session, so no stream is lost, and the state
// equals the ground truth at every checked sealed slot. Slowed down this much, the watcher
// reads a Delegate's record after the scenario may have undelegated or delegated the account
// again: the event then comes from the transaction itself.
TEST(WatcherTest, FailedReadsAreTriedAgainInsideTheSessionWithoutAGap) {
  WatcherOptions options;
  options.read_attempts = 8;
  options.read_backoff_min = absl::Milliseconds(5);
  options.read_backoff_max = absl::Milliseconds(100);
  options.max_retry_after = absl::Milliseconds(200);  // the 429s ask for a second
  const Outcome outcome = WatchAndCompare(
      {"--fault-429-rate", "0.05", "--fault-5xx-rate", "0.05", "--fault-reset-rate", "0.05"},
      options, SealedAtLeast(200));
  EXPECT_GT(outcome.read_retries, 0u);
  EXPECT_EQ(outcome.counters.stream_gaps, 0u);
  EXPECT_EQ(outcome.counters.resyncs, 1u);
}

// A fifth of the notifications never arrive: what the live path misses, the periodic
// reconciliation writes (at 5 % a run could miss nothing the live path does not repair itself). The
// scenario stops at slot 150; once a reconciliation after that slot has run, the folded state must
// equal the ground truth.
TEST(WatcherTest, DroppedNotificationsAreRepairedByReconciliation) {
  WatcherOptions options;
  options.reconcile_interval = absl::Milliseconds(300);
  const Outcome outcome = WatchAndCompare(
      {"--drop-notification-rate", "0.2", "--scenario-stop-slot", "150"}, options,
      [](const BaseLayerWatcher& w) {
        return w.last_resync_slot() > 160 && w.last_sealed_slot() >= w.last_resync_slot();
      },
      /*every_sealed_slot=*/false);
  EXPECT_GT(outcome.corrections, 0u) << "the reconciliation corrected nothing";
}

}  // namespace
}  // namespace switchyard
