#include "app/ingest_command.h"

#include <signal.h>

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
  for (size_t p = 0; p < loaded.position.partitions.size(); ++p) {
    const PartitionCursor& cursor = loaded.position.partitions[p];
    resume.last_sealed = std::max(resume.last_sealed, cursor.sealed_slot);
    RETURN_IF_ERROR(reader->Seek(static_cast<int32_t>(p), cursor.next_offset));
  }
  for (;;) {
    ASSIGN_OR_RETURN(
        size_t read, reader->Poll(10'000, absl::ZeroDuration(), [&](const LogRecordView& r) {
          absl::StatusOr<Event> event = DecodeEvent(r.payload);
          if (!event.ok() || AccountOf(*event) == nullptr) return;
          auto it = resume.view.find(*AccountOf(*event));
          const ApplyResult result =
              ApplyAccountEvent(it == resume.view.end() ? nullptr : &it->second, *event);
          resume.view[*AccountOf(*event)] = result.next;
        }));
    if (read == 0) break;
  }
  return resume;
}

WatcherOptions WatcherOptionsFrom(const IngestConfig& config, Slot resume_after_slot) {
  WatcherOptions options;
  options.base_url = config.base_url;
  options.pubsub_url = config.pubsub_url;
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

  auto log = OpenEventLog(config, /*create_if_missing=*/true);
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
  std::cout << "ingest: watching " << options.base_url << ", resuming after slot "
            << options.resume_after_slot << std::endl;
  int signal = 0;
  sigwait(&stop_signals, &signal);
  watcher.Stop();
  std::cout << "ingest: stopped at sealed slot " << watcher.last_sealed_slot()
            << " events_written=" << metrics.events_written.value() << std::endl;
  return 0;
}

}  // namespace switchyard
