// `switchyard ingest` as a process, SIGKILLed at random moments and restarted: every restart
// after a run that sealed a slot writes StreamGap, and every run Resynced after its backfill; the
// final state equals the localnet's ground truth; and no delegation or undelegation is written
// twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <thread>
#include <variant>

#include "engine/event_codec.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/localnet_process.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

// The bytes of every file under `path` (0 when it does not exist yet).
uintmax_t BytesUnder(const std::string& path) {
  uintmax_t bytes = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(path, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t size = it->file_size(size_ec);
      if (!size_ec) bytes += size;
    }
  }
  return bytes;
}

// Calls `fn` with every event that decodes in the embedded log under `log_dir`, if it exists.
// Opened only while no ingest runs, since an ingest holds the log's lock.
void ForEachEvent(const std::string& log_dir, const std::function<void(const Event&)>& fn) {
  if (!std::filesystem::exists(log_dir)) return;
  auto log = EmbeddedEventLog::Open(log_dir);
  ASSERT_TRUE(log.ok()) << log.status();
  auto reader = (*log)->NewReader();
  for (;;) {
    auto n = reader->Poll(10'000, absl::ZeroDuration(), [&](const LogRecordView& r) {
      auto event = DecodeEvent(r.payload);
      if (event.ok()) fn(*event);
    });
    ASSERT_TRUE(n.ok()) << n.status();
    if (*n == 0) break;
  }
}

// The Resynced markers in the embedded log under `log_dir` (0 before it exists).
size_t ResyncsIn(const std::string& log_dir) {
  size_t resyncs = 0;
  ForEachEvent(log_dir, [&](const Event& event) {
    if (std::holds_alternative<ResyncedEvent>(event)) ++resyncs;
  });
  return resyncs;
}

using testing::GroundTruthAt;

TEST(IngestRestartTest, SigkilledIngestResumesWithoutRewritingAndConverges) {
  testing::TempDir dir;
  const std::string truth = dir.Sub("truth.jsonl");
  const testing::LocalnetProcess net = testing::StartLocalnetProcess(
      SWITCHYARD_LOCALNET_BINARY, dir.Sub("ready.json"),
      {"--slot-ms", "10", "--seed", "21", "--accounts", "80", "--delegate-rate", "2",
       "--undelegate-rate", "1", "--scenario-er-count", "3", "--ground-truth", truth,
       "--scenario-stop-slot", "250"});
  ASSERT_NE(net.http_port, 0) << "localnet did not start";
  const pid_t localnet = net.pid;
  const std::string base = "http://127.0.0.1:" + std::to_string(net.http_port);
  const std::vector<std::string> ingest = {
      SWITCHYARD_BINARY,         "ingest", "--base", base, "--data-dir", dir.Sub("data"),
      "--reconcile-interval-ms", "200"};
  std::mt19937_64 rng(5);
  // Killed runs that got as far as their backfill's Resynced. Such a run sealed a slot, so the
  // run after it starts with a StreamGap: with kKills of them, kKills + 1 runs resynced and at
  // least kKills wrote a StreamGap. A run killed before its Resynced (on a loaded machine the
  // pause may end before the backfill does) is one more crash to recover from, not counted.
  constexpr int kKills = 6;
  int resynced_kills = 0;
  size_t resyncs = 0;
  for (int run = 0; resynced_kills < kKills; ++run) {
    ASSERT_LT(run, 4 * kKills) << "only " << resynced_kills << " of " << run
                               << " killed runs got as far as their Resynced";
    const uintmax_t before = BytesUnder(dir.Sub("data"));
    const pid_t pid = testing::StartProcess(ingest);
    // Each run first gets as far as opening its data directory (on a loaded machine the start
    // alone may take longer than the pause), then gets the pause to write its events.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (BytesUnder(dir.Sub("data")) <= before && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 350) * testing::kTimeScale);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    EXPECT_EQ(testing::WaitProcess(pid), 128 + SIGKILL);
    const size_t now = ResyncsIn(dir.Sub("data") + "/log");
    if (now > resyncs) ++resynced_kills;
    resyncs = now;
  }
  // The last run sees the scenario end and reconciles after it; then stops cleanly.
  const pid_t last = testing::StartProcess(ingest);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500) * testing::kTimeScale);
  ASSERT_EQ(kill(last, SIGTERM), 0);
  EXPECT_EQ(testing::WaitProcess(last), 0);
  kill(localnet, SIGTERM);
  EXPECT_EQ(testing::WaitProcess(localnet), 0);

  // Fold what the ingest runs wrote and compare with the ground truth.
  testing::CommandResult fold =
      testing::RunCommand({SWITCHYARD_BINARY, "fold", "--data-dir", dir.Sub("data")});
  ASSERT_EQ(fold.exit_code, 0) << fold.err;
  auto store = RocksDbStateStore::Open(dir.Sub("data") + "/state");
  ASSERT_TRUE(store.ok()) << store.status();
  auto loaded = (*store)->Load();
  ASSERT_TRUE(loaded.ok());
  const Slot applied = loaded->position.applied_slot;
  EXPECT_GT(applied, 250u) << "the last run did not get past the scenario's end";
  const auto expected = GroundTruthAt(truth, applied);
  ASSERT_FALSE(expected.empty());
  std::map<Pubkey, Pubkey> folded;
  loaded->accounts.ForEach([&](const Pubkey& account, const AccountState& state) {
    if (state.delegated) folded[account] = state.validator;
  });
  EXPECT_EQ(folded, expected) << "at slot " << applied;
  EXPECT_GE(loaded->position.counters.stream_gaps, static_cast<uint64_t>(kKills));
  EXPECT_GE(loaded->position.counters.resyncs, static_cast<uint64_t>(kKills + 1));
  EXPECT_EQ(loaded->position.counters.ignored_stale, 0u);
  store->reset();

  // Nothing was written twice: every (kind, account, slot) appears once in the log.
  std::set<std::tuple<int, Pubkey, Slot>> seen;
  size_t duplicates = 0;
  ForEachEvent(dir.Sub("data") + "/log", [&](const Event& event) {
    if (AccountOf(event) == nullptr) return;
    if (!seen.emplace(static_cast<int>(KindOf(event)), *AccountOf(event), SlotOf(event)).second) {
      ++duplicates;
    }
  });
  EXPECT_GT(seen.size(), 0u);
  EXPECT_EQ(duplicates, 0u);
}

}  // namespace
}  // namespace switchyard
