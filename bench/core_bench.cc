// Micro-benchmarks of the event-sourced core: the event codec, folding into RocksDB with
// durable commits, snapshot lookups, restart-to-ready, and snapshot create and restore with
// 1 M delegated accounts.
#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>

#include "engine/event_codec.h"
#include "engine/fold.h"
#include "engine/fold_runner.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "storage/state_snapshot.h"
#include "tests/support/forwarding_state_store.h"

namespace switchyard {

constexpr char kLoadStateFlag[] = "--load-state-and-report";

namespace {

Pubkey RandomKey(std::mt19937_64& rng) {
  std::array<uint8_t, 32> b;
  for (size_t i = 0; i < 32; i += 8) {
    const uint64_t v = rng();
    for (size_t j = 0; j < 8; ++j) b[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  return Pubkey(b);
}

// Delegations spread over 8 ER validators and 1000 owner programs, as on a busy chain.
DelegatedEvent RandomDelegation(std::mt19937_64& rng, const Pubkey& account, Slot slot) {
  static const std::vector<Pubkey> validators = [] {
    std::mt19937_64 r(11);
    std::vector<Pubkey> v;
    for (int i = 0; i < 8; ++i) v.push_back(RandomKey(r));
    return v;
  }();
  static const std::vector<Pubkey> owners = [] {
    std::mt19937_64 r(13);
    std::vector<Pubkey> v;
    for (int i = 0; i < 1000; ++i) v.push_back(RandomKey(r));
    return v;
  }();
  DelegatedEvent d;
  d.account = account;
  d.validator = validators[rng() % validators.size()];
  d.owner_program = owners[rng() % owners.size()];
  d.slot = slot;
  d.lamports = rng();
  d.commit_frequency_ms = 30000;
  return d;
}

std::filesystem::path BenchDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("switchyard-bench-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

// A single-partition log: `events` account events over `accounts` accounts, sealed every
// `per_slot` events.
std::vector<std::string> MakeLog(size_t events, size_t accounts, size_t per_slot) {
  std::mt19937_64 rng(7);
  std::vector<Pubkey> keys;
  for (size_t i = 0; i < accounts; ++i) keys.push_back(RandomKey(rng));
  std::vector<std::string> log;
  log.reserve(events + events / per_slot + 1);
  Slot slot = 1;
  for (size_t i = 0; i < events; ++i) {
    const Pubkey& key = keys[rng() % keys.size()];
    if (rng() % 3 == 0) {
      log.push_back(EncodeEvent(UndelegatedEvent{key, slot, Signature()}));
    } else {
      log.push_back(EncodeEvent(RandomDelegation(rng, key, slot)));
    }
    if ((i + 1) % per_slot == 0) log.push_back(EncodeEvent(SlotSealedEvent{slot++}));
  }
  log.push_back(EncodeEvent(SlotSealedEvent{slot}));
  return log;
}

void BM_EncodeDelegated(benchmark::State& state) {
  std::mt19937_64 rng(1);
  const Event event = RandomDelegation(rng, RandomKey(rng), 100);
  std::string out;
  for (auto _ : state) {
    out.clear();
    EncodeEvent(event, &out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EncodeDelegated);

void BM_DecodeDelegated(benchmark::State& state) {
  std::mt19937_64 rng(1);
  const std::string record = EncodeEvent(RandomDelegation(rng, RandomKey(rng), 100));
  for (auto _ : state) {
    auto event = DecodeEvent(record);
    benchmark::DoNotOptimize(event);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeDelegated);

// The fold alone, no store: 1 M events over `accounts` accounts, a batch taken every 50 k
// records as the runner takes them. items_per_second is events folded per second.
void BM_FoldInMemory(benchmark::State& state) {
  const size_t events = 1'000'000;
  const std::vector<std::string> log = MakeLog(events, static_cast<size_t>(state.range(0)), 1000);
  for (auto _ : state) {
    Fold fold(FoldOptions(), LoadedState(), 1);
    for (size_t i = 0; i < log.size(); ++i) {
      fold.Add(0, static_cast<int64_t>(i), log[i]);
      if ((i + 1) % 50'000 == 0) benchmark::DoNotOptimize(fold.TakeBatch());
    }
    benchmark::DoNotOptimize(fold.TakeBatch());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events));
}
// Arg: accounts (100 k as in the fold benchmarks below; 1 M, a map well beyond the caches).
BENCHMARK(BM_FoldInMemory)->Arg(100'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

// Folds `events` events over 100 k accounts into RocksDB, committing every `batch` records
// with fsync. items_per_second is events folded and durably committed per second. Closing the
// store flushes the memtables to table files. Untimed (BM_FoldIntoRocksDb), the rate is that
// of a burst the memtables absorb: 1 M events fit in them, so most flushing is left for later.
// Timed (BM_FoldIntoRocksDbFlushed), every event's flush is counted, the last memtables' after
// the last commit, where no folding overlaps it. BM_FoldIntoRocksDbLong folds 4 M events, so
// that the memtables fill and are flushed while the fold runs, as in a long catch-up.
void FoldIntoRocksDb(benchmark::State& state, size_t events, bool timed_close,
                     std::optional<size_t> ingest_min_rows = std::nullopt) {
  const auto batch = static_cast<size_t>(state.range(0));
  const std::vector<std::string> log = MakeLog(events, 100'000, 1000);
  for (auto _ : state) {
    state.PauseTiming();
    const auto dir = BenchDir("fold");
    RocksDbStateStoreOptions store_options;
    store_options.sync_commits = state.range(1) != 0;
    if (ingest_min_rows) store_options.ingest_min_rows = *ingest_min_rows;
    auto store = RocksDbStateStore::Open(dir.string(), store_options);
    if (!store.ok()) {
      state.SkipWithError(std::string(store.status().message()).c_str());
      return;
    }
    Fold fold(FoldOptions(), LoadedState(), 1);
    state.ResumeTiming();
    for (size_t i = 0; i < log.size(); ++i) {
      fold.Add(0, static_cast<int64_t>(i), log[i]);
      if ((i + 1) % batch == 0 || i + 1 == log.size()) {
        absl::Status s = (*store)->Commit(fold.TakeBatch());
        if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
      }
    }
    if (!timed_close) state.PauseTiming();
    store->reset();
    if (timed_close) state.PauseTiming();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events));
}
void BM_FoldIntoRocksDb(benchmark::State& state) { FoldIntoRocksDb(state, 1'000'000, false); }
void BM_FoldIntoRocksDbFlushed(benchmark::State& state) { FoldIntoRocksDb(state, 1'000'000, true); }
void BM_FoldIntoRocksDbLong(benchmark::State& state) { FoldIntoRocksDb(state, 4'000'000, false); }
// The burst with every commit through the write-ahead log (second arg 0) or every commit
// ingested as table files (1), whatever its size; fsync on.
void BM_FoldIntoRocksDbCommittedAs(benchmark::State& state) {
  FoldIntoRocksDb(state, 1'000'000, false, state.range(1) == 0 ? 0 : 1);
}
// Args: records per commit, fsync on commit (1) or not (0).
BENCHMARK(BM_FoldIntoRocksDb)
    ->Args({10'000, 1})
    ->Args({50'000, 1})
    ->Args({50'000, 0})
    ->UseRealTime()  // RocksDB's flush threads work too: count wall time, not this thread's
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);
// Args: records per commit, table files (1) or the write-ahead log (0).
BENCHMARK(BM_FoldIntoRocksDbCommittedAs)
    ->ArgsProduct({{1'000, 3'000, 10'000, 50'000}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);
BENCHMARK(BM_FoldIntoRocksDbFlushed)
    ->Args({50'000, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);
BENCHMARK(BM_FoldIntoRocksDbLong)
    ->Args({50'000, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The fold as `switchyard fold` and serve run it: a FoldRunner reads 1 M events over 100 k
// accounts from the embedded log (written before timing starts) and commits them to RocksDB
// with fsync. Pipelined commits write each batch on the commit thread while the next is read
// and folded. items_per_second is events read, folded and durably committed per second.
// Serve's fold of 1 M events over 100 k accounts from the embedded log; `one_step`: each batch
// committed in one step, for comparison with staged commits.
void FoldRunnerFromEmbeddedLog(benchmark::State& state, bool one_step) {
  const size_t events = 1'000'000;
  const std::vector<std::string> log = MakeLog(events, 100'000, 1000);
  const auto dir = BenchDir("fold-runner");
  {
    auto embedded = EmbeddedEventLog::Open((dir / "log").string());
    if (!embedded.ok()) {
      state.SkipWithError(std::string(embedded.status().message()).c_str());
      return;
    }
    std::vector<OutgoingRecord> chunk;
    for (size_t i = 0; i < log.size(); ++i) {
      chunk.push_back({"", log[i], 0});
      if (chunk.size() == 10'000 || i + 1 == log.size()) {
        if (!(*embedded)->Append(chunk).ok()) state.SkipWithError("append failed");
        chunk.clear();
      }
    }
  }
  for (auto _ : state) {
    state.PauseTiming();
    std::filesystem::remove_all(dir / "state");
    auto embedded = EmbeddedEventLog::Open((dir / "log").string());
    auto store = RocksDbStateStore::Open((dir / "state").string());
    if (!embedded.ok() || !store.ok()) {
      state.SkipWithError("cannot open the log or the store");
      return;
    }
    std::unique_ptr<EventLogReader> reader = (*embedded)->NewReader();
    FoldRunnerOptions options;
    options.pipelined_commits = state.range(0) != 0;
    options.max_batch_records = static_cast<size_t>(state.range(1));
    SystemClock clock;
    SnapshotHolder snapshots;
    // One step: the forwarder's Stage is StateStore's default, which commits at once, so the
    // staging thread does the whole commit and the apply thread nothing, as before staging.
    testing::ForwardingStateStore one_step_store(store->get());
    StateStore* target = one_step ? static_cast<StateStore*>(&one_step_store) : store->get();
    auto runner = std::make_unique<FoldRunner>(options, reader.get(), target,
                                               state.range(2) != 0 ? &snapshots : nullptr, &clock);
    state.ResumeTiming();
    absl::Status s = runner->Init();
    if (s.ok()) s = runner->RunUntilCaughtUp();
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    state.PauseTiming();
    if (runner->fold().position().counters.applied +
            runner->fold().position().counters.ignored_stale !=
        events) {
      state.SkipWithError("the fold did not apply every event");
    }
    // Closed untimed, as BM_FoldIntoRocksDb closes its store: every batch is durable once
    // RunUntilCaughtUp returns, and closing flushes the memtables, which is not folding.
    runner.reset();
    reader.reset();
    store->reset();
    embedded->reset();
    state.ResumeTiming();
  }
  std::filesystem::remove_all(dir);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events));
}
void BM_FoldRunnerFromEmbeddedLog(benchmark::State& state) {
  FoldRunnerFromEmbeddedLog(state, /*one_step=*/false);
}
void BM_FoldRunnerOneStepCommits(benchmark::State& state) {
  FoldRunnerFromEmbeddedLog(state, /*one_step=*/true);
}
// Args: pipelined commits (1) or not (0); records per commit (100 k is the default); snapshots
// published as serve publishes them (1) or none, as `switchyard fold` and replay run (0).
BENCHMARK(BM_FoldRunnerOneStepCommits)
    ->Args({1, 100'000, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);
BENCHMARK(BM_FoldRunnerFromEmbeddedLog)
    ->Args({1, 100'000, 1})
    ->Args({1, 100'000, 0})
    ->Args({0, 100'000, 0})
    ->Args({1, 50'000, 1})
    ->Args({1, 50'000, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

// The history of a fold of 1 M events over 100 k accounts, committed 50 k records at a time
// and closed (flushed), as the audits read it. Made once per process, removed at exit.
class FoldedHistory {
 public:
  static FoldedHistory& Get() {
    static FoldedHistory history;
    return history;
  }
  const std::filesystem::path& dir() const { return dir_; }
  const std::vector<Pubkey>& accounts() const { return accounts_; }
  ~FoldedHistory() { std::filesystem::remove_all(dir_); }

 private:
  FoldedHistory() : dir_(BenchDir("history")) {
    const std::vector<std::string> log = MakeLog(1'000'000, 100'000, 1000);
    auto store = RocksDbStateStore::Open(dir_.string());
    if (!store.ok()) return;
    Fold fold(FoldOptions(), LoadedState(), 1);
    for (size_t i = 0; i < log.size(); ++i) {
      fold.Add(0, static_cast<int64_t>(i), log[i]);
      if ((i + 1) % 50'000 == 0 || i + 1 == log.size()) {
        if (!(*store)->Commit(fold.TakeBatch()).ok()) return;
      }
    }
    fold.accounts().ForEach(
        [&](const Pubkey& key, const AccountState&) { accounts_.push_back(key); });
  }
  std::filesystem::path dir_;
  std::vector<Pubkey> accounts_;
};

// The store of FoldedHistory, opened; null (the benchmark skipped) when it cannot be.
std::unique_ptr<RocksDbStateStore> OpenFoldedHistory(benchmark::State& state) {
  FoldedHistory& history = FoldedHistory::Get();
  auto store = RocksDbStateStore::Open(history.dir().string());
  if (!store.ok() || history.accounts().empty()) {
    state.SkipWithError("cannot fold the history");
    return nullptr;
  }
  return *std::move(store);
}

// Every history row of the fold above in (slot, seq) order, as `history export` and the audit
// digest read them. items_per_second is rows read and decoded per second.
void BM_HistoryInSlotOrder(benchmark::State& state) {
  std::unique_ptr<RocksDbStateStore> store = OpenFoldedHistory(state);
  if (store == nullptr) return;
  uint64_t rows = 0;
  for (auto _ : state) {
    absl::Status s =
        store->ForEachHistoryRow(0, std::numeric_limits<Slot>::max(), [&](const HistoryEntry& e) {
          benchmark::DoNotOptimize(e);
          ++rows;
          return absl::OkStatus();
        });
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(rows));
}
BENCHMARK(BM_HistoryInSlotOrder)->Unit(benchmark::kMillisecond)->Iterations(3);

// One account's whole history (about ten rows), as getDelegationHistory reads it, for
// accounts taken at random. items_per_second is accounts read per second.
void BM_AccountHistory(benchmark::State& state) {
  std::unique_ptr<RocksDbStateStore> store = OpenFoldedHistory(state);
  if (store == nullptr) return;
  std::mt19937_64 rng(3);
  const std::vector<Pubkey>& accounts = FoldedHistory::Get().accounts();
  for (auto _ : state) {
    auto rows = store->History(accounts[rng() % accounts.size()]);
    if (!rows.ok() || rows->empty()) state.SkipWithError("no history read");
    benchmark::DoNotOptimize(rows);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_AccountHistory);

// 1 M delegated accounts; their keys go to `keys`.
AccountMap MillionDelegatedAccounts(std::mt19937_64& rng, std::vector<Pubkey>& keys) {
  AccountMap map;
  for (int i = 0; i < 1'000'000; ++i) {
    keys.push_back(RandomKey(rng));
    AccountState s;
    s.delegated = true;
    s.delegation_slot = static_cast<Slot>(i);
    map.Upsert(keys.back(), s);
  }
  return map;
}

// A snapshot of 1 M delegated accounts; looks up present and absent keys at random.
void BM_SnapshotLookup(benchmark::State& state) {
  std::mt19937_64 rng(3);
  std::vector<Pubkey> keys;
  AccountMap map = MillionDelegatedAccounts(rng, keys);
  for (int i = 0; i < 1'000'000; ++i) keys.push_back(RandomKey(rng));  // misses
  std::shuffle(keys.begin(), keys.end(), rng);
  Snapshot snapshot(map, 1, StateDigest(), std::nullopt, 1'000'000);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(snapshot.FindDelegation(keys[i]));
    if (++i == keys.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SnapshotLookup);

// The same lookups when the accounts asked for are a hot set of 10 k (cache-resident).
void BM_SnapshotLookupHotSet(benchmark::State& state) {
  std::mt19937_64 rng(3);
  std::vector<Pubkey> keys;
  AccountMap map = MillionDelegatedAccounts(rng, keys);
  keys.resize(10'000);
  Snapshot snapshot(map, 1, StateDigest(), std::nullopt, 1'000'000);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(snapshot.FindDelegation(keys[i]));
    if (++i == keys.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SnapshotLookupHotSet);

// Baseline for the lookups: one dependent random 8-byte read from an array as large as the
// 1 M-account map. No lookup structure can beat this on the machine that runs it.
void BM_RandomMemoryReadBaseline(benchmark::State& state) {
  const size_t n = (1'000'000 * 144) / sizeof(uint64_t);
  std::vector<uint64_t> memory(n);
  std::mt19937_64 rng(9);
  for (auto& v : memory) v = rng() % n;
  uint64_t next = 0;
  for (auto _ : state) {
    next = memory[next];
    benchmark::DoNotOptimize(next);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RandomMemoryReadBaseline);

// A state store at `dir` with 1 M delegated accounts, folded from 1 M Delegated events.
void WriteMillionAccountStore(const std::filesystem::path& dir, benchmark::State& state) {
  auto store = RocksDbStateStore::Open(dir.string());
  Fold fold(FoldOptions(), LoadedState(), 1);
  std::mt19937_64 rng(5);
  int64_t offset = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    fold.Add(0, offset++, EncodeEvent(RandomDelegation(rng, RandomKey(rng), 1)));
    if ((i + 1) % 100'000 == 0) {
      if (!(*store)->Commit(fold.TakeBatch()).ok()) state.SkipWithError("commit failed");
    }
  }
  fold.Add(0, offset++, EncodeEvent(SlotSealedEvent{1}));
  if (!(*store)->Commit(fold.TakeBatch()).ok()) state.SkipWithError("commit failed");
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The baseline of the snapshot benchmarks, in the same run: a plain recursive copy of `from`.
double CopySeconds(const std::filesystem::path& from, const std::filesystem::path& to) {
  const auto start = std::chrono::steady_clock::now();
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
  const double seconds = SecondsSince(start);
  std::filesystem::remove_all(to);
  return seconds;
}

// `snapshot create` of a live store with 1 M delegated accounts: the checkpoint, its opening
// to read the position and recompute the digest, the file checksums and the manifest.
// vs_copy: its time over a plain copy of the store's directory.
void BM_SnapshotCreate(benchmark::State& state) {
  const auto dir = BenchDir("snapshot-create");
  WriteMillionAccountStore(dir / "state", state);
  auto store = RocksDbStateStore::Open((dir / "state").string());
  if (!store.ok()) return state.SkipWithError("cannot open the store");
  double seconds = 0;
  double copy_seconds = 0;
  uint64_t bytes = 0;
  uint64_t delegated = 0;
  for (auto _ : state) {
    const auto target = dir / "snapshot";
    const auto start = std::chrono::steady_clock::now();
    auto manifest = CreateStateSnapshot(**store, target.string());
    const double took = SecondsSince(start);
    if (!manifest.ok())
      return state.SkipWithError(std::string(manifest.status().message()).c_str());
    state.SetIterationTime(took);
    seconds += took;
    bytes = manifest->total_bytes();
    delegated = manifest->delegated_accounts;
    std::filesystem::remove_all(target);
    copy_seconds += CopySeconds(dir / "state", dir / "copy");
  }
  state.counters["accounts"] = static_cast<double>(delegated);
  state.counters["snapshot_mb"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["vs_copy"] = seconds / copy_seconds;
  store->reset();
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SnapshotCreate)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

// `snapshot restore` of a snapshot with 1 M delegated accounts: every file checked against
// the manifest, copied (table files hard-linked), opened, its digest recomputed.
// vs_copy: its time over a plain copy of the snapshot's directory.
void BM_SnapshotRestore(benchmark::State& state) {
  const auto dir = BenchDir("snapshot-restore");
  WriteMillionAccountStore(dir / "state", state);
  {
    auto store = RocksDbStateStore::Open((dir / "state").string());
    if (!store.ok()) return state.SkipWithError("cannot open the store");
    auto made = CreateStateSnapshot(**store, (dir / "snapshot").string());
    if (!made.ok()) return state.SkipWithError(std::string(made.status().message()).c_str());
  }
  double seconds = 0;
  double copy_seconds = 0;
  uint64_t delegated = 0;
  for (auto _ : state) {
    const auto target = dir / "restored";
    const auto start = std::chrono::steady_clock::now();
    auto restored = RestoreStateSnapshot((dir / "snapshot").string(), target.string());
    const double took = SecondsSince(start);
    if (!restored.ok())
      return state.SkipWithError(std::string(restored.status().message()).c_str());
    state.SetIterationTime(took);
    seconds += took;
    delegated = restored->delegated_accounts;
    std::filesystem::remove_all(target);
    copy_seconds += CopySeconds(dir / "snapshot", dir / "copy");
  }
  state.counters["accounts"] = static_cast<double>(delegated);
  state.counters["vs_copy"] = seconds / copy_seconds;
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_SnapshotRestore)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

// Restart-to-ready with 1 M delegated accounts: a fresh process opens the store, loads the
// state and builds the routing snapshot. Reports seconds and the child's peak RSS.
void BM_RestartToReady(benchmark::State& state) {
  const auto dir = BenchDir("restart");
  WriteMillionAccountStore(dir, state);
  double max_rss_mb = 0;
  size_t accounts = 0;
  for (auto _ : state) {
    // A fresh process (this binary, re-executed) opens the store, loads and publishes.
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) state.SkipWithError("pipe failed");
    // posix_spawn, not fork: a forked child would count this process's pages in its RSS.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    const std::string dir_arg = dir.string();
    char* const child_argv[] = {const_cast<char*>("switchyard_core_bench"),
                                const_cast<char*>(kLoadStateFlag),
                                const_cast<char*>(dir_arg.c_str()), nullptr};
    const auto start = std::chrono::steady_clock::now();
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, child_argv, environ) != 0) {
      state.SkipWithError("posix_spawn failed");
    }
    posix_spawn_file_actions_destroy(&actions);
    close(pipe_fds[1]);
    size_t report[2] = {0, 0};  // accounts, peak RSS in kB
    (void)!read(pipe_fds[0], report, sizeof(report));
    const auto ready = std::chrono::steady_clock::now();
    int status = 0;
    waitpid(pid, &status, 0);
    close(pipe_fds[0]);
    state.SetIterationTime(std::chrono::duration<double>(ready - start).count());
    max_rss_mb = std::max(max_rss_mb, static_cast<double>(report[1]) / 1024.0);
    accounts = report[0];
  }
  state.counters["accounts"] = static_cast<double>(accounts);
  state.counters["peak_rss_mb"] = max_rss_mb;
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_RestartToReady)->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

// The child of BM_RestartToReady: open, load, build the snapshot, report the count.
int LoadStateAndReport(const char* dir) {
  auto store = RocksDbStateStore::Open(dir);
  if (!store.ok()) return 1;
  auto loaded = (*store)->Load();
  if (!loaded.ok()) return 1;
  Fold fold(FoldOptions(), std::move(*loaded), 1);
  size_t report[2] = {fold.MakeSnapshot()->delegated_count(), 0};
  // The peak RSS of this process image (VmHWM restarts at exec).
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) report[1] = std::stoul(line.substr(6));
  }
  (void)!write(1, report, sizeof(report));
  return 0;
}

}  // namespace switchyard

int main(int argc, char** argv) {
  if (argc == 3 && std::string_view(argv[1]) == switchyard::kLoadStateFlag) {
    return switchyard::LoadStateAndReport(argv[2]);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
