#include "engine/fold_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/status.h"
#include "engine/event_codec.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/event_generator.h"
#include "tests/support/forwarding_state_store.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::TempDir;

std::vector<OutgoingRecord> Encode(const std::vector<Event>& events) {
  std::vector<OutgoingRecord> out;
  for (const Event& e : events) out.push_back({EventKey(e), EncodeEvent(e), {}});
  return out;
}

// The published snapshot and the store's position hold a reference fold's digest of `events`,
// and the store's history holds each event once.
void ExpectFoldedOnce(const std::vector<Event>& events, const SnapshotHolder& snapshots,
                      RocksDbStateStore& store) {
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  EXPECT_EQ(snapshots.Current()->digest(), reference.digest);
  absl::StatusOr<FoldPosition> position = store.Position();
  ASSERT_TRUE(position.ok()) << position.status();
  EXPECT_EQ(position->digest, reference.digest);
  absl::StatusOr<uint64_t> rows = store.CountHistoryRows();
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, reference.account_events);
}

// Steps `runner` until the published snapshot reaches `slot`, for at most 30 s; the number of
// steps that failed.
int StepUntilSlot(FoldRunner& runner, const SnapshotHolder& snapshots, Slot slot) {
  int failures = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (snapshots.Current()->applied_slot() < slot && absl::Now() < deadline) {
    if (!runner.Step(absl::ZeroDuration()).ok()) ++failures;
  }
  return failures;
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

// Passes everything to a real store but fails the commits it is told to fail. Commits and
// staged commits are numbered together, in the order they are made.
class FlakyStore final : public testing::ForwardingStateStore {
 public:
  explicit FlakyStore(StateStore* store) : ForwardingStateStore(store) {}
  // Fails these commits, or the staging of these staged commits.
  void FailCommits(std::set<int> which) { fail_ = std::move(which); }
  // Fails the Apply of these staged commits, applying nothing.
  void FailApplies(std::set<int> which) { fail_apply_ = std::move(which); }
  // Runs before each commit or staging, with its number, on the thread that commits.
  void BeforeCommit(std::function<void(int)> hook) { before_commit_ = std::move(hook); }
  // Runs before each Apply of a staged commit, with its number, on the thread that applies.
  void BeforeApply(std::function<void(int)> hook) { before_apply_ = std::move(hook); }
  // The numbers of the staged commits applied, in order.
  std::vector<int> applied() {
    absl::MutexLock lock(&mu_);
    return applied_;
  }

  absl::Status Commit(const FoldBatch& batch) override {
    const int n = commits_++;
    if (before_commit_) before_commit_(n);
    if (fail_.count(n) > 0) return absl::UnavailableError("injected commit failure");
    return store()->Commit(batch);
  }
  absl::StatusOr<std::unique_ptr<StagedCommit>> Stage(const FoldBatch& batch) override {
    const int n = commits_++;
    if (before_commit_) before_commit_(n);
    if (fail_.count(n) > 0) return absl::UnavailableError("injected staging failure");
    absl::StatusOr<std::unique_ptr<StagedCommit>> staged = store()->Stage(batch);
    if (!staged.ok()) return staged.status();
    return std::make_unique<Staged>(*this, n, *std::move(staged));
  }

 private:
  class Staged final : public StagedCommit {
   public:
    Staged(FlakyStore& store, int n, std::unique_ptr<StagedCommit> staged)
        : store_(store), n_(n), staged_(std::move(staged)) {}
    absl::Status Apply() override {
      if (store_.before_apply_) store_.before_apply_(n_);
      if (store_.fail_apply_.count(n_) > 0) return absl::UnavailableError("injected apply failure");
      RETURN_IF_ERROR(staged_->Apply());
      absl::MutexLock lock(&store_.mu_);
      store_.applied_.push_back(n_);
      return absl::OkStatus();
    }

   private:
    FlakyStore& store_;
    int n_;
    std::unique_ptr<StagedCommit> staged_;
  };

  std::set<int> fail_;
  std::set<int> fail_apply_;
  std::function<void(int)> before_commit_;
  std::function<void(int)> before_apply_;
  std::atomic<int> commits_ = 0;
  absl::Mutex mu_;
  std::vector<int> applied_ ABSL_GUARDED_BY(mu_);
};

// Counts the records a reader delivers, from any thread.
class CountingReader final : public EventLogReader {
 public:
  explicit CountingReader(EventLogReader* reader) : reader_(reader) {}
  int32_t partition_count() const override { return reader_->partition_count(); }
  absl::Status Seek(int32_t p, int64_t offset) override { return reader_->Seek(p, offset); }
  void Pause(int32_t p, bool paused) override { reader_->Pause(p, paused); }
  absl::StatusOr<size_t> Poll(size_t max_records, absl::Duration timeout,
                              absl::FunctionRef<void(const LogRecordView&)> on_record) override {
    absl::StatusOr<size_t> read = reader_->Poll(max_records, timeout, on_record);
    if (read.ok()) delivered += *read;
    return read;
  }
  absl::StatusOr<int64_t> EndOffset(int32_t p) override { return reader_->EndOffset(p); }
  absl::StatusOr<int64_t> StartOffset(int32_t p) override { return reader_->StartOffset(p); }

  std::atomic<size_t> delivered = 0;

 private:
  EventLogReader* reader_;
};

// While catching up, the fold reads and folds the next batch while the commit thread writes
// the last one, and a batch's snapshot is published only once the batch is committed.
TEST(FoldRunnerTest, TheNextBatchIsFoldedWhileOneIsWrittenAndItsSnapshotWaitsForTheCommit) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  testing::GeneratorOptions options;
  options.slots = 60;
  const auto events = testing::GenerateEvents(options);
  ASSERT_TRUE((*log)->Append(Encode(events)).ok());
  auto rocksdb = RocksDbStateStore::Open(dir.Sub("state"));
  FlakyStore store(rocksdb->get());
  absl::Notification writing;
  absl::Notification release;
  std::atomic<size_t> read_while_writing = 0;
  auto log_reader = (*log)->NewReader();
  CountingReader reader(log_reader.get());
  store.BeforeCommit([&](int n) {
    if (n != 0) return;
    writing.Notify();
    // The fold goes on with the next batch meanwhile: wait until it has read it.
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (reader.delivered.load() < 100 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    read_while_writing = reader.delivered.load();
    release.WaitForNotificationWithTimeout(absl::Seconds(20));
  });
  SnapshotHolder snapshots;
  SystemClock clock;
  FoldRunnerOptions runner_options;
  runner_options.max_batch_records = 50;
  runner_options.publish_interval = absl::ZeroDuration();
  FoldRunner runner(runner_options, &reader, &store, &snapshots, &clock);
  ASSERT_TRUE(runner.Init().ok());
  ASSERT_EQ(runner.Step(absl::ZeroDuration()).value_or(0), 50u);  // handed to the commit thread
  ASSERT_TRUE(writing.WaitForNotificationWithTimeout(absl::Seconds(10)));
  std::thread second([&] { EXPECT_EQ(runner.Step(absl::ZeroDuration()).value_or(0), 50u); });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (read_while_writing.load() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(read_while_writing.load(), 100u);
  // Nothing of the batch being written is visible yet, in the store or to readers.
  EXPECT_EQ(snapshots.Current()->applied_slot(), 0u);
  EXPECT_EQ((*rocksdb)->Position()->applied_slot, 0u);
  release.Notify();
  second.join();  // the second Step waited for the first batch to be staged
  // The batches are being written now: what is published is never ahead of what is
  // committed, until the first batch shows.
  Slot published = 0;
  const absl::Time shown_by = absl::Now() + absl::Seconds(10);
  while (published == 0 && absl::Now() < shown_by) {
    published = snapshots.Current()->applied_slot();
    EXPECT_LE(published, (*rocksdb)->Position()->applied_slot);
  }
  EXPECT_GT(published, 0u);
  ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
  ExpectFoldedOnce(events, snapshots, **rocksdb);
}

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
  EXPECT_EQ(StepUntilSlot(runner, snapshots, 50), 3);
  ExpectFoldedOnce(events, snapshots, **rocksdb);
}

// The number of table files left in `dir`.
size_t FilesIn(const std::string& dir) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// A log of 60 slots and a store that writes every batch of 50 records as table files, behind
// a FlakyStore.
class FoldRunnerStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = *EmbeddedEventLog::Open(dir_.Sub("log"));
    options_.slots = 60;
    events_ = testing::GenerateEvents(options_);
    ASSERT_TRUE(log_->Append(Encode(events_)).ok());
    RocksDbStateStoreOptions store_options;
    store_options.ingest_min_rows = 10;
    auto rocksdb = RocksDbStateStore::Open(dir_.Sub("state"), store_options);
    ASSERT_TRUE(rocksdb.ok()) << rocksdb.status();
    rocksdb_ = *std::move(rocksdb);
    store_ = std::make_unique<FlakyStore>(rocksdb_.get());
    reader_ = log_->NewReader();
  }
  std::unique_ptr<FoldRunner> MakeRunner(FoldRunnerOptions options = {}) {
    options.max_batch_records = 50;
    return std::make_unique<FoldRunner>(options, reader_.get(), store_.get(), &snapshots_, &clock_);
  }
  Slot last_slot() const { return options_.first_slot + options_.slots - 1; }
  size_t files_left() const { return FilesIn(dir_.Sub("state") + "/ingest"); }

  TempDir dir_;
  testing::GeneratorOptions options_;
  std::vector<Event> events_;
  std::unique_ptr<EmbeddedEventLog> log_;
  std::unique_ptr<RocksDbStateStore> rocksdb_;
  std::unique_ptr<FlakyStore> store_;
  std::unique_ptr<EventLogReader> reader_;
  SnapshotHolder snapshots_;
  SystemClock clock_;
};

// While one batch is applied (its table files fsynced and ingested), the next is staged: its
// rows are built, and nothing of it is visible until it is applied in its turn.
TEST_F(FoldRunnerStagingTest, TheNextBatchIsStagedWhileTheOneBeforeItIsApplied) {
  absl::Notification second_staged;
  std::atomic<bool> staged_while_applying = false;
  std::atomic<Slot> slot_while_staged = 1;
  store_->BeforeCommit([&](int n) {
    if (n != 1) return;
    slot_while_staged = rocksdb_->Position()->applied_slot;
    second_staged.Notify();
  });
  // The first batch's Apply is held until the second batch is being staged.
  store_->BeforeApply([&](int n) {
    if (n == 0) {
      staged_while_applying = second_staged.WaitForNotificationWithTimeout(absl::Seconds(10));
    }
  });
  FoldRunnerOptions options;
  options.publish_interval = absl::ZeroDuration();
  std::unique_ptr<FoldRunner> runner = MakeRunner(options);
  ASSERT_TRUE(runner->Init().ok());
  ASSERT_TRUE(runner->RunUntilCaughtUp().ok());
  EXPECT_TRUE(staged_while_applying.load());
  EXPECT_EQ(slot_while_staged.load(), 0u);  // the first batch was not applied yet
  const std::vector<int> applied = store_->applied();
  ASSERT_GE(applied.size(), 2u);
  for (size_t i = 0; i < applied.size(); ++i) EXPECT_EQ(applied[i], static_cast<int>(i));
  ExpectFoldedOnce(events_, snapshots_, *rocksdb_);
  EXPECT_GT(rocksdb_->ingested_commits(), 1u);
  EXPECT_EQ(files_left(), 0u);
}

// A batch that fails to apply takes the batch staged behind it down with it: that one is
// dropped unapplied (applying it would skip the failed one's events), the step reports the
// failure once, and the fold goes on from what the store holds.
TEST_F(FoldRunnerStagingTest, AFailedApplyDropsTheBatchStagedBehindIt) {
  store_->FailApplies({1});
  absl::Notification third_staged;
  store_->BeforeCommit([&](int n) {
    if (n == 2) third_staged.Notify();
  });
  // The second batch fails only once the third is staged and waits behind it.
  store_->BeforeApply([&](int n) {
    if (n == 1) third_staged.WaitForNotificationWithTimeout(absl::Seconds(10));
  });
  std::unique_ptr<FoldRunner> runner = MakeRunner();
  ASSERT_TRUE(runner->Init().ok());
  EXPECT_EQ(StepUntilSlot(*runner, snapshots_, last_slot()), 1);
  EXPECT_TRUE(third_staged.HasBeenNotified());
  const std::vector<int> applied = store_->applied();
  ASSERT_GE(applied.size(), 2u);
  EXPECT_EQ(applied[0], 0);
  // Neither the failed batch nor the one staged behind it was applied; the next ones were.
  EXPECT_EQ(std::count(applied.begin(), applied.end(), 1), 0);
  EXPECT_EQ(std::count(applied.begin(), applied.end(), 2), 0);
  ExpectFoldedOnce(events_, snapshots_, *rocksdb_);
  EXPECT_EQ(files_left(), 0u);
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

TEST(FoldRunnerTest, RefusesToFoldPastAHoleInTheLogAndSaysWhere) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  testing::GeneratorOptions gen;
  gen.slots = 20;
  ASSERT_TRUE((*log)->Append(Encode(testing::GenerateEvents(gen))).ok());
  ASSERT_TRUE((*log)->DropBefore(37).ok());
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  SystemClock clock;
  MetricsRegistry registry;
  FoldMetrics metrics(registry);
  FoldRunner runner(FoldRunnerOptions(), reader.get(), store->get(), &snapshots, &clock, &metrics);
  ASSERT_TRUE(runner.Init().ok());  // the state loads; the fold refuses to go on
  const absl::Status refused = runner.RunUntilCaughtUp();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_NE(refused.message().find("partition 0 starts at offset 37 but the state's next "
                                   "offset there is 0"),
            std::string_view::npos)
      << refused;
  EXPECT_EQ(runner.log_hole(), (LogHole{0, 0, 37}));
  // Retried: still refused, counted once.
  EXPECT_EQ(runner.Step(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(metrics.log_hole.value(), 1);
  EXPECT_EQ(metrics.log_holes.value(), 1u);
  EXPECT_EQ(metrics.records.value(), 0u);
  EXPECT_EQ(snapshots.Current()->applied_slot(), 0u);
  auto position = (*store)->Position();
  ASSERT_TRUE(position.ok());
  EXPECT_EQ(position->applied_slot, 0u);
}

TEST(FoldRunnerTest, AStateAtTheLogsFirstRetainedOffsetFoldsOn) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  testing::GeneratorOptions gen;
  gen.slots = 40;
  const auto events = testing::GenerateEvents(gen);
  const size_t half = events.size() / 2;
  ASSERT_TRUE((*log)->Append(Encode({events.begin(), events.begin() + half})).ok());
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  SystemClock clock;
  MetricsRegistry registry;
  FoldMetrics metrics(registry);
  int64_t next_offset = 0;
  {
    auto reader = (*log)->NewReader();
    FoldRunner runner(FoldRunnerOptions(), reader.get(), store->get(), nullptr, &clock);
    ASSERT_TRUE(runner.Init().ok());
    ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
    next_offset = (*store)->Position()->partitions.at(0).next_offset;
  }
  ASSERT_GT(next_offset, 0);
  // Retention takes exactly what the state has folded.
  ASSERT_TRUE((*log)->DropBefore(next_offset).ok());
  ASSERT_TRUE((*log)->Append(Encode({events.begin() + half, events.end()})).ok());
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  FoldRunner runner(FoldRunnerOptions(), reader.get(), store->get(), &snapshots, &clock, &metrics);
  ASSERT_TRUE(runner.Init().ok());
  ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  EXPECT_EQ(snapshots.Current()->digest(), reference.digest);
  EXPECT_EQ(runner.log_hole(), std::nullopt);
  EXPECT_EQ(metrics.log_hole.value(), 0);
  EXPECT_EQ(metrics.log_holes.value(), 0u);
}

TEST(FoldRunnerTest, AHoleOpenedAheadOfAFoldThatHasStartedStopsItWithTheReason) {
  TempDir dir;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"));
  testing::GeneratorOptions gen;
  gen.slots = 10;
  const auto events = testing::GenerateEvents(gen);
  const size_t half = events.size() / 2;
  ASSERT_TRUE((*log)->Append(Encode({events.begin(), events.begin() + half})).ok());
  auto store = RocksDbStateStore::Open(dir.Sub("state"));
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  SystemClock clock;
  MetricsRegistry registry;
  FoldMetrics metrics(registry);
  FoldRunnerOptions options;
  options.poll_timeout = absl::Milliseconds(10);
  options.error_backoff = absl::Milliseconds(10);
  FoldRunner runner(options, reader.get(), store->get(), &snapshots, &clock, &metrics);
  ASSERT_TRUE(runner.Init().ok());
  ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
  const Slot folded_slot = snapshots.Current()->applied_slot();
  ASSERT_GT(folded_slot, 0u);
  // The committed position: records read but waiting for their slot's seal are not in it.
  const int64_t next = (*store)->Position()->partitions.at(0).next_offset;
  const int64_t start = static_cast<int64_t>(half) + 5;
  // Retention deletes records the fold has not read yet.
  ASSERT_TRUE((*log)->Append(Encode({events.begin() + half, events.end()})).ok());
  ASSERT_TRUE((*log)->DropBefore(start).ok());
  // The read finds the hole; the reload that follows says what it is.
  EXPECT_EQ(runner.Step(absl::ZeroDuration()).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(runner.Step(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(runner.log_hole(), (LogHole{0, next, start}));
  runner.Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (runner.error().empty() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(2));
  runner.Stop();
  EXPECT_NE(runner.error().find(absl::StrCat("log hole: partition 0 starts at offset ", start)),
            std::string::npos)
      << runner.error();
  EXPECT_EQ(metrics.log_hole.value(), 1);
  EXPECT_EQ(metrics.log_holes.value(), 1u);
  EXPECT_EQ(snapshots.Current()->applied_slot(), folded_slot);
}

}  // namespace
}  // namespace switchyard
