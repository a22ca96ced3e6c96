// Crash safety of the fold: `switchyard fold` runs as a child process over a large log and
// is SIGKILLed at random moments, then restarted; at the end the state must equal a
// reference fold computed in memory, with no history row duplicated and the offsets at the
// end of the log. The number of kills comes from SWITCHYARD_CRASH_KILLS (default 50).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>

#include "engine/event_codec.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/event_generator.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

// The log is extended between runs so that it always holds more than a run can fold: every
// kill lands while the fold is working, on a fast machine or a loaded one.
class GrowingLog {
 public:
  explicit GrowingLog(std::string dir) : dir_(std::move(dir)) {}

  // Appends chunks until the log holds at least `ahead` records past `offset`.
  void EnsureAhead(int64_t offset, int64_t ahead) {
    while (end_ - offset < ahead) AppendChunk();
  }
  int64_t end() const { return end_; }
  const testing::ReferenceFold& reference() const { return reference_; }
  Slot last_slot() const { return next_slot_ - 1; }

 private:
  void AppendChunk() {
    testing::GeneratorOptions options;
    options.seed = 100 + chunks_++;
    options.account_seed = 42;
    options.accounts = 20'000;
    options.first_slot = next_slot_;
    options.slots = 500;
    options.events_per_slot = 200;
    options.gap_probability = 0.01;
    next_slot_ += options.slots;
    auto log = EmbeddedEventLog::Open(dir_);
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<OutgoingRecord> records;
    for (const Event& e : testing::GenerateEvents(options)) {
      reference_.Apply(e);
      records.push_back({EventKey(e), EncodeEvent(e), {}});
    }
    ASSERT_TRUE((*log)->Append(records).ok());
    end_ = (*log)->end_offset();
  }

  std::string dir_;
  testing::ReferenceFold reference_;
  int64_t end_ = 0;
  uint64_t chunks_ = 0;
  Slot next_slot_ = 1;
};

int64_t CommittedOffset(const std::string& state_dir) {
  auto store = RocksDbStateStore::Open(state_dir);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return -1;
  auto position = (*store)->Position();
  EXPECT_TRUE(position.ok());
  return position->partitions.empty() ? 0 : position->partitions[0].next_offset;
}

// Runs `switchyard fold` with `config_text`, kills it at random moments, and checks the state
// the last, unkilled run leaves against the reference fold of the whole log. The last run's
// output goes to `last_out`.
void FoldThroughKills(const std::string& config_text, std::string* last_out) {
  const char* env = std::getenv("SWITCHYARD_CRASH_KILLS");
  const int kills = env != nullptr ? std::atoi(env) : 50;
  testing::TempDir dir;
  const std::string data = dir.Sub("data");
  GrowingLog log(data + "/log");
  const std::string config = dir.Sub("crash.toml");
  std::ofstream(config) << config_text;
  const std::vector<std::string> fold = {SWITCHYARD_BINARY, "fold", "--data-dir", data,
                                         "--config",        config};

  std::mt19937_64 rng(1234);
  int killed = 0;
  int64_t committed = 0;
  int progressed = 0;
  // Kills land between 20 ms and `window_us` after the start. A run killed before its first
  // commit widens the window (up to 3.2 s), so that on a slow disk, where a commit's fsyncs
  // take long, kills still land after commits as well as before them.
  int64_t window_us = 400'000;
  for (int i = 0; i < kills; ++i) {
    log.EnsureAhead(committed, 600'000);
    const pid_t pid = testing::StartProcess(fold);
    // (A sanitized fold starts and folds several times slower: the moments are scaled.)
    const int64_t moment_us = 20'000 + static_cast<int64_t>(rng() % (window_us - 20'000));
    usleep(static_cast<useconds_t>(moment_us * testing::kTimeScale));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    const int code = testing::WaitProcess(pid);
    if (code == 128 + SIGKILL) ++killed;
    const int64_t now = CommittedOffset(data + "/state");
    ASSERT_GE(now, committed) << "the committed offset went backwards";
    if (now > committed) {
      ++progressed;
    } else if (progressed == 0) {
      window_us = std::min<int64_t>(window_us * 2, 3'200'000);
    }
    committed = now;
  }
  // The figures go to the test's XML report (ctest --output-junit), not to its output.
  ::testing::Test::RecordProperty("runs_killed", killed);
  ::testing::Test::RecordProperty("runs_that_progressed", progressed);
  ::testing::Test::RecordProperty("records_committed", std::to_string(committed));
  ::testing::Test::RecordProperty("kill_window_ms", static_cast<int>(window_us / 1000));
  EXPECT_GE(killed, kills * 9 / 10) << "runs finished before the kill";
  EXPECT_GT(progressed, 0) << "no killed run ever committed a batch";

  testing::CommandResult last = testing::RunCommand(fold);
  ASSERT_EQ(last.exit_code, 0) << last.err;
  *last_out = last.out;

  const testing::ReferenceFold& reference = log.reference();
  auto store = RocksDbStateStore::Open(data + "/state");
  ASSERT_TRUE(store.ok()) << store.status();
  auto position = (*store)->Position();
  ASSERT_TRUE(position.ok());
  EXPECT_EQ(position->digest, reference.digest);
  EXPECT_EQ(position->applied_slot, log.last_slot());
  ASSERT_EQ(position->partitions.size(), 1u);
  EXPECT_EQ(position->partitions[0].next_offset, log.end());
  EXPECT_EQ(position->counters.applied + position->counters.ignored_stale,
            reference.account_events);
  auto rows = (*store)->CountHistoryRows();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, reference.account_events) << "history rows duplicated or lost";
  uint64_t in_slot_order = 0;
  ASSERT_TRUE((*store)
                  ->ForEachHistoryRow(0, log.last_slot(),
                                      [&](const HistoryEntry&) {
                                        ++in_slot_order;
                                        return absl::OkStatus();
                                      })
                  .ok());
  EXPECT_EQ(in_slot_order, reference.account_events) << "records duplicated or lost";
  auto sealed = (*store)->SealedDigests();
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(sealed->size(), log.last_slot());
  for (const auto& [slot, digest] : *sealed) {
    ASSERT_EQ(digest, reference.sealed_digests.at(slot)) << "slot " << slot;
  }
}

// Small batches: many commits, each written through the write-ahead log, so kills land
// between and during them.
TEST(CrashTest, FoldSurvivesSigkillAtRandomMoments) {
  std::string out;
  FoldThroughKills("[fold]\nmax_batch_records = 3000\n", &out);
  EXPECT_NE(out.find(" ingested_commits=0\n"), std::string::npos) << out;
}

// Large batches ingested as table files (docs/architecture.md, "Crash safety"): kills land
// while the files are built, while they are ingested, and between commits.
TEST(CrashTest, FoldIngestingTableFilesSurvivesSigkillAtRandomMoments) {
  std::string out;
  FoldThroughKills("[fold]\nmax_batch_records = 20000\n[storage]\ningest_min_rows = 2000\n", &out);
  EXPECT_EQ(out.find(" ingested_commits=0\n"), std::string::npos) << out;
  EXPECT_NE(out.find(" ingested_commits="), std::string::npos) << out;
}

}  // namespace
}  // namespace switchyard
