// Ingest lag: switchyard-localnet runs its scenario (real Delegate and Undelegate
// transactions); the watcher writes the embedded log; the fold runner folds it and publishes
// snapshots. For each base slot S, lag = the time the snapshot's applied slot first reached S
// minus the time the base announced S. Prints median, p90, p99 and max, and the events/s
// the watcher wrote.
//
//   ingest_lag LOCALNET_BINARY [--slot-ms N] [--seconds N] [--delegate-rate R]
#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/fold_runner.h"
#include "ingest/watcher.h"
#include "storage/embedded_event_log.h"
#include "storage/rocksdb_state_store.h"
#include "tests/support/subprocess.h"

namespace switchyard {
namespace {

using Clock = std::chrono::steady_clock;

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: ingest_lag LOCALNET_BINARY [--slot-ms N] [--seconds N] "
                 "[--delegate-rate R]\n";
    return 2;
  }
  std::string slot_ms = "400";
  int seconds = 20;
  std::string rate = "2";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--slot-ms") slot_ms = argv[i + 1];
    if (flag == "--seconds") seconds = std::stoi(argv[i + 1]);
    if (flag == "--delegate-rate") rate = argv[i + 1];
  }
  const auto dir = std::filesystem::temp_directory_path() /
                   ("switchyard-ingest-lag-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string ready = (dir / "ready.json").string();
  const pid_t localnet = testing::StartProcess(
      {argv[1], "--port", "0", "--threads", "1", "--ready-file", ready, "--slot-ms", slot_ms,
       "--seed", "9", "--accounts", "5000", "--delegate-rate", rate, "--undelegate-rate",
       std::to_string(std::stod(rate) / 2), "--scenario-er-count", "3"});
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!std::filesystem::exists(ready) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  simdjson::dom::parser parser;
  const uint64_t port = parser.load(ready)["http"].get_uint64().value();

  auto log = EmbeddedEventLog::Open((dir / "log").string());
  auto store = RocksDbStateStore::Open((dir / "state").string());
  if (!log.ok() || !store.ok()) return 1;
  SystemClock clock;
  SnapshotHolder snapshots;
  absl::Mutex mu;
  std::map<Slot, Clock::time_point> applied_at;  // first time the applied slot reached a slot
  Slot highest_applied = 0;
  snapshots.AddListener([&](const std::shared_ptr<const Snapshot>& s) {
    const auto now = Clock::now();
    absl::MutexLock lock(&mu);
    for (Slot slot = highest_applied + 1; slot <= s->applied_slot(); ++slot) applied_at[slot] = now;
    highest_applied = std::max(highest_applied, s->applied_slot());
  });
  auto reader = (*log)->NewReader();
  FoldRunnerOptions fold_options;
  fold_options.poll_timeout = absl::Milliseconds(5);
  FoldRunner runner(fold_options, reader.get(), store->get(), &snapshots, &clock);
  if (!runner.Init().ok()) return 1;
  runner.Start();

  MetricsRegistry registry;
  WatcherMetrics metrics(registry);
  WatcherOptions options;
  options.endpoints = {{"http://127.0.0.1:" + std::to_string(port), ""}};
  options.seal_lag = 0;  // localnet sends a slot's notifications before its slot notification
  BaseLayerWatcher watcher(options, log->get(), {}, &clock, &metrics);
  if (!watcher.Start().ok()) return 1;

  // The base's own announcement of each slot.
  const BaseEndpoint ws = *ParseUrl("ws://127.0.0.1:" + std::to_string(port + 1));
  auto pubsub = BasePubsubConnection::Connect(ws, absl::Seconds(5));
  if (!pubsub.ok()) return 1;
  (void)(*pubsub)->Send(R"({"jsonrpc":"2.0","id":1,"method":"slotSubscribe"})", absl::Seconds(5));
  std::map<Slot, Clock::time_point> base_at;
  const auto start = Clock::now();
  const uint64_t written_before = metrics.events_written.value();
  while (Clock::now() - start < std::chrono::seconds(seconds)) {
    auto message = (*pubsub)->Read(absl::Milliseconds(100));
    if (!message.ok()) break;
    if (!*message) continue;
    const auto now = Clock::now();
    simdjson::dom::element doc;
    if (parser.parse(**message).get(doc) != simdjson::SUCCESS) continue;
    uint64_t slot = 0;
    if (doc["params"]["result"]["slot"].get_uint64().get(slot) == simdjson::SUCCESS) {
      base_at.emplace(slot, now);
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const uint64_t written = metrics.events_written.value() - written_before;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let the last slots apply
  watcher.Stop();
  runner.Stop();
  kill(localnet, SIGTERM);
  testing::WaitProcess(localnet);

  std::vector<double> lags_ms;
  {
    absl::MutexLock lock(&mu);
    for (const auto& [slot, t] : base_at) {
      auto it = applied_at.find(slot);
      if (it == applied_at.end()) continue;
      lags_ms.push_back(std::chrono::duration<double, std::milli>(it->second - t).count());
    }
  }
  std::sort(lags_ms.begin(), lags_ms.end());
  auto pct = [&](double p) {
    return lags_ms.empty()
               ? 0.0
               : lags_ms[std::min(lags_ms.size() - 1, static_cast<size_t>(p * lags_ms.size()))];
  };
  std::cout << "slot_ms=" << slot_ms << " slots_measured=" << lags_ms.size()
            << " lag_ms_p50=" << pct(0.5) << " lag_ms_p90=" << pct(0.9)
            << " lag_ms_p99=" << pct(0.99)
            << " lag_ms_max=" << (lags_ms.empty() ? 0 : lags_ms.back())
            << " events_written=" << written << " events_per_sec=" << written / elapsed
            << " stream_gaps=" << metrics.stream_gaps.value() << "\n";
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace switchyard

int main(int argc, char** argv) { return switchyard::Main(argc, argv); }
