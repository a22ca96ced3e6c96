// `switchyard history export` streams in constant memory: the peak resident set of the export
// process does not grow with the number of rows it writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "engine/event_codec.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/event_generator.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace switchyard {
namespace {

using testing::CommandResult;
using testing::RunCommand;
using testing::TempDir;

// A state directory whose history holds `rows` rows over `accounts` accounts, ten per slot.
// Written by a child process: the export's peak resident set, as wait4 reports it, includes
// what its parent held when it forked, so the test process must stay small.
void WriteHistory(const std::string& dir, uint64_t rows, size_t accounts) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid > 0) {
    ASSERT_EQ(testing::WaitProcess(pid), 0) << "writing the history failed";
    return;
  }
  RocksDbStateStoreOptions options;
  options.sync_commits = false;
  auto store = RocksDbStateStore::Open(dir, options);
  if (!store.ok()) _exit(1);
  FoldBatch batch;
  uint64_t seq = 0;
  while (seq < rows) {
    batch = FoldBatch();
    for (int i = 0; i < 50'000 && seq < rows; ++i, ++seq) {
      const Slot slot = 1 + seq / 10;
      DelegatedEvent d = testing::TestDelegation(0, slot);
      const uint64_t account = seq % accounts;
      std::memcpy(d.account.data(), &account, sizeof(account));
      Signature signature;
      std::memcpy(signature.data(), &seq, sizeof(seq));
      d.signature = signature;
      batch.AddHistory(d.account, slot, seq, false, EncodeEvent(d));
    }
    batch.position.next_seq = seq;
    if (!(*store)->Commit(batch).ok()) _exit(1);
  }
  store->reset();
  _exit(0);
}

struct ExportRun {
  uint64_t rows = 0;
  double rows_per_sec = 0;
  int64_t max_rss_kb = 0;
};

ExportRun Export(const std::string& data_dir, const std::string& out) {
  CommandResult r = RunCommand({SWITCHYARD_BINARY, "history", "export", "--format", "jsonl",
                                "--out", out, "--data-dir", data_dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  ExportRun run;
  run.max_rss_kb = r.max_rss_kb;
  if (std::regex_search(r.err, m, std::regex("exported rows=([0-9]+) .*rows_per_sec=([0-9]+)"))) {
    run.rows = std::stoull(m[1]);
    run.rows_per_sec = std::stod(m[2]);
  } else {
    ADD_FAILURE() << r.err;
  }
  return run;
}

uint64_t CountLines(const std::string& path) {
  std::ifstream in(path);
  uint64_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// Exports of `small` and `large` rows: both complete, and the larger one's peak resident set
// is within `slack_kb` of the smaller one's.
void ExpectConstantMemory(uint64_t small, uint64_t large, int64_t slack_kb) {
  TempDir dir;
  WriteHistory(dir.Sub("small/state"), small, 1000);
  WriteHistory(dir.Sub("large/state"), large, 1000);
  const ExportRun a = Export(dir.Sub("small"), dir.Sub("small.jsonl"));
  const ExportRun b = Export(dir.Sub("large"), dir.Sub("large.jsonl"));
  EXPECT_EQ(a.rows, small);
  EXPECT_EQ(b.rows, large);
  EXPECT_EQ(CountLines(dir.Sub("large.jsonl")), large);
  EXPECT_GT(a.max_rss_kb, 0);
  EXPECT_LT(b.max_rss_kb, a.max_rss_kb + testing::MemoryBoundKib(slack_kb))
      << "peak RSS " << a.max_rss_kb << " KiB for " << small << " rows, " << b.max_rss_kb
      << " KiB for " << large;
  ::testing::Test::RecordProperty("rows", std::to_string(large));
  ::testing::Test::RecordProperty("rows_per_sec", std::to_string(b.rows_per_sec));
  ::testing::Test::RecordProperty("peak_rss_kb", std::to_string(b.max_rss_kb));
}

TEST(HistoryExportTest, PeakMemoryDoesNotGrowWithTheRowsExported) {
  ExpectConstantMemory(20'000, 200'000, 16 * 1024);
}

// The same at a million rows (label `slow`).
TEST(HistoryExportTest, AMillionRowsExportInConstantMemory) {
  ExpectConstantMemory(20'000, 1'000'000, 24 * 1024);
}

}  // namespace
}  // namespace switchyard
