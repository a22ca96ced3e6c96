// The fold and the embedded log on a filesystem that fills up: a tmpfs mounted for the test
// (the tests skip, naming the reason, where mounting is not permitted).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "engine/event_codec.h"
#include "engine/fold_runner.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/event_generator.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tmpfs.h"

namespace switchyard {
namespace {

using testing::TempDir;
using testing::TmpfsMount;

// Big enough for RocksDB to resume by itself once the filler is gone: it waits for a
// memtable's worth (write_buffer_size, 128 MiB for the state store) of free space.
constexpr int kTmpfsMegabytes = 320;

std::vector<OutgoingRecord> Encode(const std::vector<Event>& events) {
  std::vector<OutgoingRecord> out;
  for (const Event& e : events) out.push_back({EventKey(e), EncodeEvent(e), {}});
  return out;
}

testing::GeneratorOptions Chunk(uint64_t seed, Slot first_slot) {
  testing::GeneratorOptions options;
  options.seed = seed;
  options.account_seed = 7;
  options.first_slot = first_slot;
  options.slots = 40;
  options.events_per_slot = 50;
  return options;
}

TEST(DiskFullTest, FoldStopsOnAFullStateDiskKeepsItsSnapshotAndResumesWhenSpaceReturns) {
  TempDir dir;
  TmpfsMount disk(dir.Sub("state"), kTmpfsMegabytes);
  if (!disk.error().empty()) GTEST_SKIP() << disk.error();
  EmbeddedEventLogOptions log_options;
  log_options.sync_appends = false;
  auto log = EmbeddedEventLog::Open(dir.Sub("log"), log_options);
  ASSERT_TRUE(log.ok()) << log.status();
  testing::ReferenceFold reference;
  const std::vector<Event> first = testing::GenerateEvents(Chunk(1, 1));
  for (const Event& e : first) reference.Apply(e);
  ASSERT_TRUE((*log)->Append(Encode(first)).ok());
  const StateDigest first_digest = reference.digest;

  auto store = RocksDbStateStore::Open(dir.Sub("state/db"));
  ASSERT_TRUE(store.ok()) << store.status();
  auto reader = (*log)->NewReader();
  SnapshotHolder snapshots;
  SystemClock clock;
  MetricsRegistry registry;
  FoldMetrics metrics(registry);
  FoldRunnerOptions options;
  options.max_batch_records = 500;
  FoldRunner runner(options, reader.get(), store->get(), &snapshots, &clock, &metrics);
  ASSERT_TRUE(runner.Init().ok());
  ASSERT_TRUE(runner.RunUntilCaughtUp().ok());
  ASSERT_EQ(snapshots.Current()->digest(), first_digest);

  ASSERT_GT(disk.Fill(), 0u);
  const std::vector<Event> second = testing::GenerateEvents(Chunk(2, 41));
  for (const Event& e : second) reference.Apply(e);
  ASSERT_TRUE((*log)->Append(Encode(second)).ok());

  // The next commits fail, naming the store's path; the snapshot stays the last one applied.
  absl::Status failed;
  for (int i = 0; i < 50 && failed.ok(); ++i) {
    failed = runner.Step(absl::Milliseconds(10)).status();
  }
  ASSERT_FALSE(failed.ok()) << "the fold committed onto a full disk";
  EXPECT_NE(failed.message().find(dir.Sub("state/db")), std::string_view::npos) << failed;
  EXPECT_NE(failed.message().find("No space left on device"), std::string_view::npos) << failed;
  EXPECT_GE(metrics.commit_errors.value(), 1u);
  EXPECT_EQ(snapshots.Current()->applied_slot(), 40u);
  EXPECT_EQ(snapshots.Current()->digest(), first_digest);
  // Still failing while the disk stays full: nothing was half-applied.
  EXPECT_FALSE(runner.Step(absl::Milliseconds(10)).ok());
  EXPECT_EQ(snapshots.Current()->digest(), first_digest);

  // Space returns: the fold goes on by itself (RocksDB resumes), to the reference's state.
  disk.Free();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  absl::Status caught_up = absl::UnavailableError("not tried");
  while (!caught_up.ok() && std::chrono::steady_clock::now() < deadline) {
    caught_up = runner.RunUntilCaughtUp();
    if (!caught_up.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(caught_up.ok()) << caught_up;
  EXPECT_EQ(snapshots.Current()->applied_slot(), 80u);
  EXPECT_EQ(snapshots.Current()->digest(), reference.digest);
  auto position = (*store)->Position();
  ASSERT_TRUE(position.ok());
  EXPECT_EQ(position->digest, reference.digest);
  EXPECT_EQ(position->partitions[0].next_offset, (*log)->end_offset());
  auto rows = (*store)->CountHistoryRows();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, reference.account_events) << "history rows lost or written twice";
  auto sealed = (*store)->SealedDigests();
  ASSERT_TRUE(sealed.ok());
  ASSERT_EQ(sealed->size(), 80u);
  for (const auto& [slot, digest] : *sealed) {
    EXPECT_EQ(digest, reference.sealed_digests.at(slot)) << "slot " << slot;
  }
}

TEST(DiskFullTest, EmbeddedLogAppendFailsOnAFullDiskKeepsItsRecordsAndResumes) {
  TempDir dir;
  TmpfsMount disk(dir.Sub("log"), kTmpfsMegabytes);
  if (!disk.error().empty()) GTEST_SKIP() << disk.error();
  const std::string path = dir.Sub("log/db");
  const std::vector<OutgoingRecord> first = Encode(testing::GenerateEvents(Chunk(1, 1)));
  const std::vector<OutgoingRecord> second = Encode(testing::GenerateEvents(Chunk(2, 41)));
  {
    auto log = EmbeddedEventLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE((*log)->Append(first).ok());
    ASSERT_GT(disk.Fill(), 0u);
    absl::Status failed;
    int64_t appended_before = 0;  // the appends that still fit
    for (int i = 0; i < 50 && failed.ok(); ++i) {
      failed = (*log)->Append(second);
      if (failed.ok()) ++appended_before;
    }
    ASSERT_FALSE(failed.ok()) << "appended onto a full disk";
    EXPECT_NE(failed.message().find(path), std::string_view::npos) << failed;
    EXPECT_NE(failed.message().find("No space left on device"), std::string_view::npos) << failed;
    const int64_t end = (*log)->end_offset();
    EXPECT_EQ(end, static_cast<int64_t>(first.size() + appended_before * second.size()))
        << "the failed append moved the end of the log";
    // The records already written read back while the disk is full.
    auto reader = (*log)->NewReader();
    std::vector<std::string> read;
    ASSERT_TRUE(reader
                    ->Poll(end, absl::Milliseconds(10),
                           [&](const LogRecordView& r) { read.emplace_back(r.payload); })
                    .ok());
    ASSERT_EQ(static_cast<int64_t>(read.size()), end);
    for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(read[i], first[i].payload) << i;

    disk.Free();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    absl::Status appended = absl::UnavailableError("not tried");
    while (!appended.ok() && std::chrono::steady_clock::now() < deadline) {
      appended = (*log)->Append(second);
      if (!appended.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(appended.ok()) << appended;
    EXPECT_EQ((*log)->end_offset(), end + static_cast<int64_t>(second.size()));
  }
  // Reopened: every acknowledged record in order, with no hole.
  auto log = EmbeddedEventLog::Open(path);
  ASSERT_TRUE(log.ok()) << log.status();
  auto reader = (*log)->NewReader();
  std::vector<std::string> read;
  auto polled = reader->Poll((*log)->end_offset(), absl::Milliseconds(10),
                             [&](const LogRecordView& r) { read.emplace_back(r.payload); });
  ASSERT_TRUE(polled.ok()) << polled.status();
  ASSERT_EQ(static_cast<int64_t>(read.size()), (*log)->end_offset());
  for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(read[i], first[i].payload) << i;
  const size_t tail = read.size() - second.size();
  for (size_t i = 0; i < second.size(); ++i) ASSERT_EQ(read[tail + i], second[i].payload) << i;
}

}  // namespace
}  // namespace switchyard
