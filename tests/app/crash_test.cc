// Crash safety of the fold: `switchyard fold` runs as a child process over a large log and
// is SIGKILLed at random moments, then restarted; at the end the state must equal a
// reference fold computed in memory, with no history row duplicated and the offsets at the
// end of the log. The number of kills comes from SWITCHYARD_CRASH_KILLS (default 50).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>

#include "engine/event_codec.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/event_generator.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

TEST(CrashTest, FoldSurvivesSigkillAtRandomMoments) {
  const char* env = std::getenv("SWITCHYARD_CRASH_KILLS");
  const int kills = env != nullptr ? std::atoi(env) : 50;
  testing::TempDir dir;
  const std::string data = dir.Sub("data");

  testing::GeneratorOptions options;
  options.seed = 42;
  options.accounts = 20'000;
  options.slots = 2'000;
  options.events_per_slot = 150;
  options.gap_probability = 0.01;
  const std::vector<Event> events = testing::GenerateEvents(options);
  testing::ReferenceFold reference;
  for (const Event& e : events) reference.Apply(e);
  {
    auto log = EmbeddedEventLog::Open(data + "/log");
    ASSERT_TRUE(log.ok()) << log.status();
    std::vector<OutgoingRecord> records;
    for (const Event& e : events) records.push_back({EventKey(e), EncodeEvent(e), {}});
    ASSERT_TRUE((*log)->Append(records).ok());
  }
  // Small batches: many commits, so kills land between and during them.
  const std::string config = dir.Sub("crash.toml");
  std::ofstream(config) << "[fold]\nmax_batch_records = 3000\n";
  const std::vector<std::string> fold = {SWITCHYARD_BINARY, "fold", "--data-dir", data,
                                         "--config",        config};

  std::mt19937_64 rng(1234);
  int killed = 0;
  int finished_early = 0;
  for (int i = 0; i < kills; ++i) {
    const pid_t pid = testing::StartProcess(fold);
    usleep(static_cast<useconds_t>(20'000 + rng() % 80'000));
    if (kill(pid, SIGKILL) == 0) {
      const int code = testing::WaitProcess(pid);
      if (code == 128 + SIGKILL) {
        ++killed;
      } else {
        ASSERT_EQ(code, 0) << "fold failed on its own";
        ++finished_early;
      }
    }
  }
  // The log must be long enough that the kills interrupt real work.
  EXPECT_GE(killed, kills * 9 / 10) << finished_early << " runs finished before the kill";
  {
    // The killed runs committed part of the log, not none and not all of it.
    auto store = RocksDbStateStore::Open(data + "/state");
    ASSERT_TRUE(store.ok()) << store.status();
    auto position = (*store)->Position();
    ASSERT_TRUE(position.ok());
    const int64_t committed =
        position->partitions.empty() ? 0 : position->partitions[0].next_offset;
    EXPECT_GT(committed, 0);
    EXPECT_LT(committed, static_cast<int64_t>(events.size()));
    std::cout << "killed runs committed " << committed << " of " << events.size() << " records\n";
  }
  testing::CommandResult last = testing::RunCommand(fold);
  ASSERT_EQ(last.exit_code, 0) << last.err;
  std::cout << "final run: " << last.out;

  auto store = RocksDbStateStore::Open(data + "/state");
  ASSERT_TRUE(store.ok()) << store.status();
  auto position = (*store)->Position();
  ASSERT_TRUE(position.ok());
  EXPECT_EQ(position->digest, reference.digest);
  EXPECT_EQ(position->applied_slot, options.first_slot + options.slots - 1);
  ASSERT_EQ(position->partitions.size(), 1u);
  EXPECT_EQ(position->partitions[0].next_offset, static_cast<int64_t>(events.size()));
  EXPECT_EQ(position->counters.applied + position->counters.ignored_stale,
            reference.account_events);
  auto rows = (*store)->CountHistoryRows();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, reference.account_events) << "history rows duplicated or lost";
  auto sealed = (*store)->SealedDigests();
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(sealed->size(), options.slots);
  for (const auto& [slot, digest] : *sealed) {
    ASSERT_EQ(digest, reference.sealed_digests.at(slot)) << "slot " << slot;
  }
}

}  // namespace
}  // namespace switchyard
