#include "storage/periodic_snapshots.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/event_codec.h"
#include "engine/fold_runner.h"
#include "storage/embedded_event_log.h"
#include "storage/state_snapshot.h"
#include "tests/support/event_generator.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

class PeriodicSnapshotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = EmbeddedEventLog::Open(dir_.Sub("log"));
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = *std::move(log);
    auto store = RocksDbStateStore::Open(dir_.Sub("state"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    testing::GeneratorOptions gen;
    gen.slots = 50;
    events_ = testing::GenerateEvents(gen);
  }

  // Appends events [from, to) and folds everything the log holds.
  void Fold(size_t from, size_t to) {
    std::vector<OutgoingRecord> records;
    for (size_t i = from; i < to; ++i) {
      records.push_back({EventKey(events_[i]), EncodeEvent(events_[i]), {}});
    }
    ASSERT_TRUE(log_->Append(records).ok());
    auto reader = log_->NewReader();
    SystemClock clock;
    FoldRunner runner(FoldRunnerOptions(), reader.get(), store_.get(), nullptr, &clock);
    ASSERT_TRUE(runner.Init().ok());
    ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
  }

  std::vector<std::string> SnapshotNames() {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_.Sub("snapshots"))) {
      names.push_back(entry.path().filename().string());
    }
    std::ranges::sort(names);
    return names;
  }

  TempDir dir_;
  std::unique_ptr<EmbeddedEventLog> log_;
  std::unique_ptr<RocksDbStateStore> store_;
  std::vector<Event> events_;
};

TEST_F(PeriodicSnapshotsTest, KeepsTheNewestAndPointsLatestAtTheLastOne) {
  MetricsRegistry registry;
  PeriodicSnapshotMetrics metrics(registry);
  PeriodicSnapshots snapshots({dir_.Sub("snapshots"), absl::Hours(1), 2}, store_.get(), &metrics);
  std::vector<std::string> made;
  const size_t third = events_.size() / 3;
  for (size_t round = 0; round < 3; ++round) {
    Fold(round * third, round == 2 ? events_.size() : (round + 1) * third);
    absl::StatusOr<std::string> dir = snapshots.MakeOne();
    ASSERT_TRUE(dir.ok()) << dir.status();
    made.push_back(*dir);
  }
  EXPECT_EQ(metrics.created.value(), 3u);
  const std::vector<std::string> names = SnapshotNames();
  ASSERT_EQ(names.size(), 3u) << "two snapshots and latest";
  EXPECT_EQ(names[0], "latest");
  EXPECT_EQ(dir_.Sub("snapshots") + "/" + names[1], made[1]);
  EXPECT_EQ(dir_.Sub("snapshots") + "/" + names[2], made[2]);
  EXPECT_EQ(fs::read_symlink(dir_.Sub("snapshots") + "/latest"), fs::path(made[2]).filename());

  // latest restores to the state as it stood at the last snapshot.
  auto restored = RestoreStateSnapshot(dir_.Sub("snapshots") + "/latest", dir_.Sub("restored"));
  ASSERT_TRUE(restored.ok()) << restored.status();
  auto position = store_->Position();
  ASSERT_TRUE(position.ok());
  EXPECT_EQ(restored->applied_slot, position->applied_slot);
  EXPECT_EQ(restored->digest, position->digest);
  EXPECT_EQ(metrics.last_applied_slot.value(), static_cast<int64_t>(position->applied_slot));
}

TEST_F(PeriodicSnapshotsTest, TheThreadMakesOneEveryIntervalUntilStopped) {
  Fold(0, events_.size());
  MetricsRegistry registry;
  PeriodicSnapshotMetrics metrics(registry);
  PeriodicSnapshots snapshots({dir_.Sub("snapshots"), absl::Milliseconds(20), 1}, store_.get(),
                              &metrics);
  snapshots.Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (metrics.created.value() < 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  snapshots.Stop();
  EXPECT_GE(metrics.created.value(), 3u);
  EXPECT_EQ(metrics.failures.value(), 0u);
  const std::vector<std::string> names = SnapshotNames();
  ASSERT_EQ(names.size(), 2u) << "one snapshot and latest";
  EXPECT_TRUE(VerifyStateSnapshot(dir_.Sub("snapshots") + "/latest").ok());
}

TEST_F(PeriodicSnapshotsTest, AFailedSnapshotLeavesNothingAndIsCounted) {
  Fold(0, events_.size());
  // A file where the snapshot directory should be: nothing can be made under it.
  { std::ofstream(dir_.Sub("snapshots")) << "not a directory"; }
  MetricsRegistry registry;
  PeriodicSnapshotMetrics metrics(registry);
  PeriodicSnapshots snapshots({dir_.Sub("snapshots"), absl::Milliseconds(20), 2}, store_.get(),
                              &metrics);
  snapshots.Start();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (metrics.failures.value() < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  snapshots.Stop();
  EXPECT_GE(metrics.failures.value(), 1u);
  EXPECT_EQ(metrics.created.value(), 0u);
  EXPECT_TRUE(fs::is_regular_file(dir_.Sub("snapshots")));
}

}  // namespace
}  // namespace switchyard
