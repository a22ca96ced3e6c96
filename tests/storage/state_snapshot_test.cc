#include "storage/state_snapshot.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/event_codec.h"
#include "engine/fold_runner.h"
#include "storage/embedded_event_log.h"
#include "tests/support/event_generator.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::vector<OutgoingRecord> Encode(const std::vector<Event>& events) {
  std::vector<OutgoingRecord> out;
  for (const Event& e : events) out.push_back({EventKey(e), EncodeEvent(e), {}});
  return out;
}

// Folds everything `log` holds into `store`.
void FoldAll(EmbeddedEventLog& log, StateStore& store) {
  auto reader = log.NewReader();
  SystemClock clock;
  FoldRunner runner(FoldRunnerOptions(), reader.get(), &store, nullptr, &clock);
  ASSERT_TRUE(runner.Init().ok());
  const absl::Status folded = runner.RunUntilCaughtUp();
  ASSERT_TRUE(folded.ok()) << folded;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// The largest table file of a snapshot.
fs::path LargestTableFile(const std::string& snapshot) {
  fs::path largest;
  uintmax_t size = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(snapshot) / "state")) {
    if (entry.path().extension() == ".sst" && entry.file_size() > size) {
      largest = entry.path();
      size = entry.file_size();
    }
  }
  return largest;
}

class StateSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto log = EmbeddedEventLog::Open(dir_.Sub("log"));
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = *std::move(log);
    gen_.slots = 200;
    events_ = testing::GenerateEvents(gen_);
    for (const Event& e : events_) reference_.Apply(e);
  }

  std::unique_ptr<RocksDbStateStore> OpenStore(const std::string& name) {
    auto store = RocksDbStateStore::Open(dir_.Sub(name));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // A store with every event folded, and a snapshot of it in `snapshot`.
  void FoldAndSnapshot(const std::string& snapshot) {
    ASSERT_TRUE(log_->Append(Encode(events_)).ok());
    auto store = OpenStore("state");
    ASSERT_NE(store, nullptr);
    FoldAll(*log_, *store);
    auto made = CreateStateSnapshot(*store, snapshot);
    ASSERT_TRUE(made.ok()) << made.status();
  }

  TempDir dir_;
  std::unique_ptr<EmbeddedEventLog> log_;
  testing::GeneratorOptions gen_;
  std::vector<Event> events_;
  testing::ReferenceFold reference_;
};

TEST_F(StateSnapshotTest, CreateThenRestoreGivesTheSameStatePositionAndDigest) {
  ASSERT_TRUE(log_->Append(Encode(events_)).ok());
  auto store = OpenStore("state");
  FoldAll(*log_, *store);
  auto position = store->Position();
  ASSERT_TRUE(position.ok());
  auto made = CreateStateSnapshot(*store, dir_.Sub("snapshot"));
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->applied_slot, gen_.first_slot + gen_.slots - 1);
  EXPECT_EQ(made->digest, reference_.digest);
  EXPECT_EQ(made->delegated_accounts, reference_.Delegated().size());
  EXPECT_EQ(made->next_offsets, std::vector<int64_t>{log_->end_offset()});
  EXPECT_FALSE(made->files.empty());

  auto restored = RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("restored"));
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->digest, reference_.digest);
  auto copy = OpenStore("restored");
  ASSERT_NE(copy, nullptr);
  auto copied = copy->Position();
  ASSERT_TRUE(copied.ok());
  EXPECT_EQ(copied->applied_slot, position->applied_slot);
  EXPECT_EQ(copied->digest, reference_.digest);
  EXPECT_EQ(copied->partitions, position->partitions);
  EXPECT_EQ(copied->counters, position->counters);
  EXPECT_EQ(copied->next_seq, position->next_seq);
  auto scan = copy->ScanState();
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(scan->digest, reference_.digest);
  EXPECT_EQ(*copy->CountHistoryRows(), reference_.account_events);
  EXPECT_EQ(*copy->SealedDigests(), *store->SealedDigests());
  for (const Pubkey& account : testing::GeneratedAccounts(gen_)) {
    EXPECT_EQ(*copy->GetAccount(account), *store->GetAccount(account));
  }
}

TEST_F(StateSnapshotTest, SnapshotsMadeWhileTheFoldCommitsAreEachOneWholeMoment) {
  auto store = OpenStore("state");
  auto reader = log_->NewReader();
  SnapshotHolder snapshots;
  SystemClock clock;
  FoldRunnerOptions options;
  options.max_batch_records = 7;  // a commit every few records
  options.poll_timeout = absl::Milliseconds(5);
  FoldRunner runner(options, reader.get(), store.get(), &snapshots, &clock);
  ASSERT_TRUE(runner.Init().ok());
  runner.Start();
  // The writer appends one slot at a time while snapshots are made. Halfway it waits for two
  // snapshots of a folded slot, so that snapshots overlap the fold however slow a snapshot is
  // against a commit (under a sanitizer, several times slower).
  std::atomic<bool> written{false};
  std::atomic<int> mid_fold_made{0};
  std::thread writer([&] {
    size_t begin = 0;
    for (size_t i = 0; i < events_.size(); ++i) {
      if (std::holds_alternative<SlotSealedEvent>(events_[i])) {
        EXPECT_TRUE(log_->Append(Encode({events_.begin() + begin, events_.begin() + i + 1})).ok());
        begin = i + 1;
      }
      if (i == events_.size() / 2) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (mid_fold_made < 2 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      }
    }
    written = true;
  });
  const Slot last = gen_.first_slot + gen_.slots - 1;
  std::vector<SnapshotManifest> made;
  for (int n = 0; !written || snapshots.Current()->applied_slot() < last; ++n) {
    auto manifest = CreateStateSnapshot(*store, dir_.Sub("snapshot-" + std::to_string(n)));
    ASSERT_TRUE(manifest.ok()) << manifest.status();
    made.push_back(*manifest);
    if (manifest->applied_slot != 0) ++mid_fold_made;
    if (n > 500) break;
  }
  writer.join();
  runner.Stop();
  size_t mid_fold = 0;
  for (size_t n = 0; n < made.size(); ++n) {
    const SnapshotManifest& m = made[n];
    if (m.applied_slot == 0) continue;
    ++mid_fold;
    // The digest of exactly the slots applied, and a restore that agrees with it.
    EXPECT_EQ(m.digest, reference_.sealed_digests.at(m.applied_slot)) << "slot " << m.applied_slot;
    auto restored = RestoreStateSnapshot(dir_.Sub("snapshot-" + std::to_string(n)),
                                         dir_.Sub("restored-" + std::to_string(n)));
    EXPECT_TRUE(restored.ok()) << restored.status();
  }
  EXPECT_GE(mid_fold, 2u) << "the fold ended before the snapshots could overlap it";
}

TEST_F(StateSnapshotTest, ACorruptTableFileIsRefusedAndNothingIsRestored) {
  FoldAndSnapshot(dir_.Sub("snapshot"));
  const fs::path table = LargestTableFile(dir_.Sub("snapshot"));
  ASSERT_FALSE(table.empty());
  // A copy, so the flip does not reach the live store through a hard link.
  std::string bytes = ReadFile(table);
  fs::remove(table);
  bytes[bytes.size() / 2] ^= 0x01;
  WriteFile(table, bytes);
  auto restored = RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("restored"));
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss) << restored.status();
  EXPECT_NE(restored.status().message().find(table.filename().string() + " does not match its "
                                                                         "checksum"),
            std::string_view::npos)
      << restored.status();
  EXPECT_FALSE(fs::exists(dir_.Sub("restored")));
  EXPECT_FALSE(fs::exists(dir_.Sub("restored.restoring")));
}

TEST_F(StateSnapshotTest, ATruncatedFileIsRefused) {
  FoldAndSnapshot(dir_.Sub("snapshot"));
  const fs::path table = LargestTableFile(dir_.Sub("snapshot"));
  std::string bytes = ReadFile(table);
  fs::remove(table);
  WriteFile(table, bytes.substr(0, bytes.size() - 100));
  auto restored = RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("restored"));
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss) << restored.status();
  EXPECT_NE(restored.status().message().find("(truncated?)"), std::string_view::npos)
      << restored.status();
  EXPECT_FALSE(fs::exists(dir_.Sub("restored")));
}

TEST_F(StateSnapshotTest, ACorruptOrTruncatedOrMissingManifestIsRefused) {
  FoldAndSnapshot(dir_.Sub("snapshot"));
  const fs::path manifest = fs::path(dir_.Sub("snapshot")) / "snapshot.manifest";
  const std::string good = ReadFile(manifest);

  std::string flipped = good;
  flipped[good.find("applied_slot ") + 13] ^= 0x01;
  WriteFile(manifest, flipped);
  auto restored = RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("restored"));
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(restored.status().message().find("checksum does not match"), std::string_view::npos)
      << restored.status();

  WriteFile(manifest, good.substr(0, good.size() / 2));
  restored = RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("restored"));
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(restored.status().message().find("the manifest is corrupt"), std::string_view::npos)
      << restored.status();

  fs::remove(manifest);
  restored = RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("restored"));
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kNotFound) << restored.status();
  EXPECT_FALSE(fs::exists(dir_.Sub("restored")));

  WriteFile(manifest, good);
  EXPECT_TRUE(RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("restored")).ok());
}

TEST_F(StateSnapshotTest, AManifestWhoseDigestIsNotTheStatesIsRefused) {
  FoldAndSnapshot(dir_.Sub("snapshot"));
  auto manifest = ReadSnapshotManifest(dir_.Sub("snapshot"));
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  // A well-formed manifest (its checksum recomputed) that states another digest.
  manifest->digest = StateDigest::FromParts(manifest->digest.high(), manifest->digest.low() + 1);
  ASSERT_TRUE(WriteSnapshotManifest(dir_.Sub("snapshot"), *manifest).ok());
  auto restored = RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("restored"));
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss) << restored.status();
  EXPECT_NE(restored.status().message().find("the digest recomputed from the restored state is " +
                                             reference_.digest.ToHex()),
            std::string_view::npos)
      << restored.status();
  EXPECT_FALSE(fs::exists(dir_.Sub("restored")));
}

TEST_F(StateSnapshotTest, RestoreRefusesAStateDirectoryThatIsNotEmpty) {
  FoldAndSnapshot(dir_.Sub("snapshot"));
  auto restored = RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("state"));
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kAlreadyExists) << restored.status();
}

TEST_F(StateSnapshotTest, ABootstrappedReplicaFoldsOnFromTheOffsetsToTheDigestOfAFoldFromZero) {
  const size_t half = events_.size() / 2;
  ASSERT_TRUE(log_->Append(Encode({events_.begin(), events_.begin() + half})).ok());
  SnapshotManifest manifest;
  {
    auto first = OpenStore("first");
    FoldAll(*log_, *first);
    auto made = CreateStateSnapshot(*first, dir_.Sub("snapshot"));
    ASSERT_TRUE(made.ok()) << made.status();
    manifest = *made;
  }
  ASSERT_GT(manifest.applied_slot, 0u);
  ASSERT_GT(manifest.next_offsets.at(0), 0);
  ASSERT_TRUE(log_->Append(Encode({events_.begin() + half, events_.end()})).ok());
  // A replica folded from offset 0, while the log still has every record.
  auto from_zero = OpenStore("from-zero");
  FoldAll(*log_, *from_zero);
  // Retention takes what the snapshot has folded.
  ASSERT_TRUE(log_->DropBefore(manifest.next_offsets[0]).ok());

  ASSERT_TRUE(RestoreStateSnapshot(dir_.Sub("snapshot"), dir_.Sub("bootstrapped")).ok());
  auto bootstrapped = OpenStore("bootstrapped");
  auto reader = log_->NewReader();
  SnapshotHolder snapshots;
  SystemClock clock;
  FoldRunner runner(FoldRunnerOptions(), reader.get(), bootstrapped.get(), &snapshots, &clock);
  ASSERT_TRUE(runner.Init().ok());
  EXPECT_EQ(snapshots.Current()->applied_slot(), manifest.applied_slot);
  const absl::Status folded = runner.RunUntilCaughtUp();
  ASSERT_TRUE(folded.ok()) << folded;
  EXPECT_EQ(snapshots.Current()->applied_slot(), gen_.first_slot + gen_.slots - 1);
  EXPECT_EQ(snapshots.Current()->digest(), reference_.digest);
  EXPECT_EQ(bootstrapped->Position()->digest, from_zero->Position()->digest);
  EXPECT_EQ(*bootstrapped->SealedDigests(), *from_zero->SealedDigests());
  EXPECT_EQ(*bootstrapped->CountHistoryRows(), reference_.account_events)
      << "events folded twice or lost";

  // A new replica without the snapshot cannot be built from this log any more.
  auto fresh = OpenStore("fresh");
  auto fresh_reader = log_->NewReader();
  FoldRunner refused(FoldRunnerOptions(), fresh_reader.get(), fresh.get(), nullptr, &clock);
  ASSERT_TRUE(refused.Init().ok());
  EXPECT_EQ(refused.RunUntilCaughtUp().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace switchyard
