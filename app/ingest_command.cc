#include "app/ingest_command.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "app/log_url.h"
#include "common/clock.h"
#include "common/status.h"
#include "engine/event_codec.h"
#include "engine/fold_runner.h"
#include "ingest/watcher.h"
#include "storage/rocksdb_state_store.h"

namespace switchyard {
absl::StatusOr<IngestResume> ResumeIngest(FoldRunner& runner, StateStore& store, EventLog& log) {
  RETURN_IF_ERROR(runner.RunUntilCaughtUp());
  ASSIGN_OR_RETURN(LoadedState loaded, store.Load());
  IngestResume resume;
  loaded.accounts.ForEach([&resume](const Pubkey& account, const AccountState& state) {
    resume.view[account] = state;
  });
  ASSIGN_OR_RETURN(std::unique_ptr<EventLogReader> reader, log.OpenReader());
  // Read the tail up to the end each partition has now: a remote log (Kafka) may deliver
  // nothing on the first polls although records are there.
  std::vector<int64_t> next(static_cast<size_t>(reader->partition_count()), 0);
  std::vector<int64_t> ends(next.size());
  for (size_t p = 0; p < next.size(); ++p) {
    if (p < loaded.position.partitions.size()) {
      const PartitionCursor& cursor = loaded.position.partitions[p];
      resume.last_sealed = std::max(resume.last_sealed, cursor.sealed_slot);
      next[p] = cursor.next_offset;
    }
    RETURN_IF_ERROR(reader->Seek(static_cast<int32_t>(p), next[p]));
    ASSIGN_OR_RETURN(ends[p], reader->EndOffset(static_cast<int32_t>(p)));
  }
  auto behind = [&] {
    for (size_t p = 0; p < next.size(); ++p) {
      if (next[p] < ends[p]) return true;
    }
    return false;
  };
  const absl::Time deadline = absl::Now() + absl::Minutes(1);
  while (behind()) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("reading the log's unsealed tail timed out");
    }
    ASSIGN_OR_RETURN(
        size_t read, reader->Poll(10'000, absl::Milliseconds(100), [&](const LogRecordView& r) {
          next[r.partition] = r.offset + 1;
          absl::StatusOr<Event> event = DecodeEvent(r.payload);
          if (!event.ok() || AccountOf(*event) == nullptr) return;
          auto it = resume.view.find(*AccountOf(*event));
          const ApplyResult result =
              ApplyAccountEvent(it == resume.view.end() ? nullptr : &it->second, *event);
          resume.view[*AccountOf(*event)] = result.next;
        }));
    (void)read;
  }
  return resume;
}

WatcherOptions WatcherOptionsFrom(const IngestConfig& config, Slot resume_after_slot) {
  WatcherOptions options;
  for (const IngestEndpointConfig& endpoint : config.endpoints) {
    options.endpoints.push_back({endpoint.url, endpoint.pubsub_url});
  }
  options.max_lag_slots = static_cast<uint64_t>(config.max_lag_slots);
  options.probe_interval = absl::Milliseconds(config.probe_interval_ms);
  options.tls.verify = config.verify_tls;
  options.tls.ca_file = config.tls_ca_file;
  options.reconcile_interval = absl::Milliseconds(config.reconcile_interval_ms);
  options.resume_after_slot = resume_after_slot;
  return options;
}

int RunIngest(const Config& config) {
  // Block the stop signals before any thread starts, then wait for one of them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto log = OpenEventLogRetrying(config, /*create_if_missing=*/true, nullptr, stop_signals);
  if (absl::IsCancelled(log.status())) {
    std::cout << "ingest: " << log.status().message() << std::endl;
    return 0;
  }
  if (!log.ok()) {
    std::cerr << "error: " << log.status().message() << "\n";
    return 1;
  }
  RocksDbStateStoreOptions store_options;
  store_options.sync_commits = config.sync;
  auto store = RocksDbStateStore::Open(config.StateDir(), store_options);
  if (!store.ok()) {
    std::cerr << "error: " << store.status().message() << "\n";
    return 1;
  }
  auto reader = (*log)->OpenReader();
  if (!reader.ok()) {
    std::cerr << "error: " << reader.status().message() << "\n";
    return 1;
  }
  SystemClock clock;
  FoldRunnerOptions fold_options = config.fold;
  fold_options.poll_timeout = absl::ZeroDuration();
  FoldRunner runner(fold_options, reader->get(), store->get(), nullptr, &clock);
  const absl::Status init = runner.Init();
  absl::StatusOr<IngestResume> resume =
      init.ok() ? ResumeIngest(runner, **store, **log) : absl::StatusOr<IngestResume>(init);
  // A log that went away after it opened (a Kafka broker down) is waited for, like the open.
  for (absl::Duration delay = absl::Milliseconds(250);
       !resume.ok() && IsRetryableLogError(resume.status());
       delay = std::min(delay * 2, absl::Seconds(10))) {
    spdlog::warn("ingest: cannot read the log {}: {}; retrying in {}", config.log_url,
                 std::string(resume.status().message()), absl::FormatDuration(delay));
    if (WaitForStopSignal(stop_signals, delay)) return 0;
    resume = ResumeIngest(runner, **store, **log);
  }
  if (!resume.ok()) {
    std::cerr << "error: " << resume.status().message() << "\n";
    return 1;
  }
  const WatcherOptions options = WatcherOptionsFrom(config.ingest, resume->last_sealed);
  MetricsRegistry registry;
  WatcherMetrics metrics(registry);
  BaseLayerWatcher watcher(options, log->get(), std::move(resume->view), &clock, &metrics);
  if (absl::Status s = watcher.Start(); !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  std::cout << "ingest: watching " << options.endpoints[0].url
            << (options.endpoints.size() > 1
                    ? fmt::format(" (and {} more endpoints)", options.endpoints.size() - 1)
                    : "")
            << ", resuming after slot " << options.resume_after_slot << std::endl;
  int signal = 0;
  sigwait(&stop_signals, &signal);
  watcher.Stop();
  std::cout << "ingest: stopped at sealed slot " << watcher.last_sealed_slot()
            << " events_written=" << metrics.events_written.value() << std::endl;
  return 0;
}

}  // namespace switchyard
