#include "engine/fold_runner.h"

#include <gtest/gtest.h>

#include <set>

#include "engine/event_codec.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/event_generator.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::TempDir;

std::vector<OutgoingRecord> Encode(const std::vector<Event>& events) {
  std::vector<OutgoingRecord> out;
  for (const Event& e : events) out.push_back({EventKey(e), EncodeEvent(e), {}});
  return out;
}

TEST(FoldRunnerTest, FoldsTheLogAndPublishesWholeSlotSnapshots) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  ASSERT_TRUE(log.ok());
  testing::GeneratorOptions options;
  options.slots = 100;
  const auto events = testing::GenerateEvents(options);
  ASSERT_TRUE((*log)->Append(Encode(events)).ok());
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);

  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  ASSERT_TRUE(store.ok());
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  SystemClock clock;
  MetricsRegistry registry;
  FoldMetrics metrics(registry);
  FoldRunnerOptions runner_options;
  runner_options.max_batch_records = 97;  // many small commits
  FoldRunner runner(runner_options, reader.get(), store->get(), &snapshots, &clock, &metrics);
  ASSERT_TRUE(runner.Init().ok());
  ASSERT_TRUE(runner.RunUntilCaughtUp().ok());

  auto snapshot = snapshots.Current();
  ASSERT_NE(snapshot, nullptr);
  EXPECT_EQ(snapshot->applied_slot(), options.first_slot + options.slots - 1);
  EXPECT_EQ(snapshot->digest(), reference.digest);
  const auto delegated = reference.Delegated();
  EXPECT_EQ(snapshot->delegated_count(), delegated.size());
  for (const Pubkey& account : testing::GeneratedAccounts(options)) {
    const std::optional<AccountState> found = snapshot->FindDelegation(account);
    auto it = delegated.find(account);
    ASSERT_EQ(found.has_value(), it != delegated.end());
    if (found) {
      EXPECT_EQ(*found, it->second);
    }
  }
  EXPECT_EQ(metrics.records.value(), events.size());
  EXPECT_EQ(metrics.applied.value() + metrics.ignored_stale.value(), reference.account_events);
  EXPECT_GT(metrics.commits.value(), 5u);
  EXPECT_EQ(metrics.applied_slot.value(), static_cast<int64_t>(snapshot->applied_slot()));
}

TEST(FoldRunnerTest, RestartResumesFromStoredOffsetsAndLoadsTheSnapshotFromRocksDb) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  testing::GeneratorOptions options;
  options.slots = 60;
  const auto events = testing::GenerateEvents(options);
  const size_t half = events.size() / 2;
  ASSERT_TRUE((*log)->Append(Encode({events.begin(), events.begin() + half})).ok());
  SystemClock clock;
  {
    auto store = RocksDbStateStore::Open(dir.Sub("state"));
    auto reader = (*log)->NewReader();
    FoldRunner runner(FoldRunnerOptions(), reader.get(), store->get(), nullptr, &clock);
    ASSERT_TRUE(runner.Init().ok());
    ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
  }
  ASSERT_TRUE((*log)->Append(Encode({events.begin() + half, events.end()})).ok());
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  FoldRunner runner(FoldRunnerOptions(), reader.get(), store->get(), &snapshots, &clock);
  ASSERT_TRUE(runner.Init().ok());
  // Before reading anything new, the snapshot is the stored state.
  const Slot stored_slot = snapshots.Current()->applied_slot();
  EXPECT_GT(stored_slot, 0u);
  ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  EXPECT_EQ(snapshots.Current()->digest(), reference.digest);
  auto rows = (*store)->CountHistoryRows();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, reference.account_events);  // nothing folded twice
}

// Passes everything to a real store but fails the commits it is told to fail.
class FlakyStore final : public StateStore {
 public:
  explicit FlakyStore(StateStore* store) : store_(store) {}
  void FailCommits(std::set<int> which) { fail_ = std::move(which); }

  absl::StatusOr<LoadedState> Load() override { return store_->Load(); }
  absl::Status Commit(const FoldBatch& batch) override {
    if (fail_.count(commits_++) > 0) return absl::UnavailableError("injected commit failure");
    return store_->Commit(batch);
  }
  absl::StatusOr<FoldPosition> Position() override { return store_->Position(); }
  absl::StatusOr<std::optional<AccountState>> GetAccount(const Pubkey& a) override {
    return store_->GetAccount(a);
  }
  absl::StatusOr<std::optional<AccountState>> GetAccountAt(const Pubkey& a, Slot s) override {
    return store_->GetAccountAt(a, s);
  }
  absl::StatusOr<std::vector<HistoryEntry>> History(const Pubkey& a) override {
    return store_->History(a);
  }
  absl::StatusOr<std::vector<HistoryEntry>> HistoryBetween(const Pubkey& a, Slot from, Slot to,
                                                           size_t limit) override {
    return store_->HistoryBetween(a, from, to, limit);
  }
  absl::StatusOr<std::optional<StateDigest>> SealedDigest(Slot s) override {
    return store_->SealedDigest(s);
  }
  absl::StatusOr<std::vector<SealedDigestAt>> LastSealedDigests(Slot at_or_below,
                                                                size_t count) override {
    return store_->LastSealedDigests(at_or_below, count);
  }
  absl::StatusOr<std::vector<std::pair<Slot, StateDigest>>> SealedDigests() override {
    return store_->SealedDigests();
  }
  absl::StatusOr<std::vector<QuarantineEntry>> Quarantine() override {
    return store_->Quarantine();
  }

 private:
  StateStore* store_;
  std::set<int> fail_;
  int commits_ = 0;
};

// Regression: a failed commit dropped the batch the fold had already taken, and the next
// commit wrote the batches after it, skipping its events.
TEST(FoldRunnerTest, FailedCommitIsRetriedFromTheStoredStateWithoutLosingABatch) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  testing::GeneratorOptions options;
  options.slots = 50;
  const auto events = testing::GenerateEvents(options);
  ASSERT_TRUE((*log)->Append(Encode(events)).ok());
  auto rocksdb = RocksDbStateStore::Open(dir.Sub("state"));
  FlakyStore store(rocksdb->get());
  store.FailCommits({1, 2, 5});
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  SystemClock clock;
  FoldRunnerOptions runner_options;
  runner_options.max_batch_records = 50;
  FoldRunner runner(runner_options, reader.get(), &store, &snapshots, &clock);
  ASSERT_TRUE(runner.Init().ok());
  int failures = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (snapshots.Current()->applied_slot() < 50 && absl::Now() < deadline) {
    if (!runner.Step(absl::ZeroDuration()).ok()) ++failures;
  }
  EXPECT_EQ(failures, 3);
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  EXPECT_EQ(snapshots.Current()->digest(), reference.digest);
  auto rows = (*rocksdb)->CountHistoryRows();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, reference.account_events);
  auto position = (*rocksdb)->Position();
  EXPECT_EQ(position->digest, reference.digest);
}

TEST(FoldRunnerTest, BackgroundThreadFollowsAppends) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  SystemClock clock;
  FoldRunnerOptions options;
  options.poll_timeout = absl::Milliseconds(10);
  FoldRunner runner(options, reader.get(), store->get(), &snapshots, &clock);
  ASSERT_TRUE(runner.Init().ok());
  runner.Start();
  testing::GeneratorOptions gen;
  gen.slots = 20;
  ASSERT_TRUE((*log)->Append(Encode(testing::GenerateEvents(gen))).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (snapshots.Current()->applied_slot() < 20 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  runner.Stop();
  EXPECT_EQ(snapshots.Current()->applied_slot(), 20u);
}

}  // namespace
}  // namespace switchyard
