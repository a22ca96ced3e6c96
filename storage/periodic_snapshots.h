#pragma once

#include <cstddef>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "storage/rocksdb_state_store.h"

namespace switchyard {

// The snapshots serve makes by itself ([snapshot] in the config; docs/architecture.md §7,
// "Retention").
struct PeriodicSnapshotOptions {
  // Holds one directory per snapshot, snapshot-UNIX_MS, and `latest`, a symbolic link to the
  // newest (for serve --bootstrap-from DIR/latest).
  std::string dir;
  absl::Duration interval = absl::Hours(6);
  size_t keep = 2;  // after each new snapshot, all but the newest `keep` are deleted
};

struct PeriodicSnapshotMetrics {
  explicit PeriodicSnapshotMetrics(MetricsRegistry& registry);
  Counter& created;
  Counter& failures;
  Gauge& last_applied_slot;
  Gauge& last_created_unix_seconds;
};

// Makes a snapshot of the state store every interval, the first one interval after Start, on
// a thread of its own (a snapshot blocks on the disk), and deletes the oldest beyond `keep`. A
// failure is logged, counted and retried at the next interval. Owned by serve, which calls
// Start and Stop from one thread; the store and the metrics must outlive it.
class PeriodicSnapshots {
 public:
  PeriodicSnapshots(PeriodicSnapshotOptions options, RocksDbStateStore* store,
                    PeriodicSnapshotMetrics* metrics);
  ~PeriodicSnapshots();
  PeriodicSnapshots(const PeriodicSnapshots&) = delete;
  PeriodicSnapshots& operator=(const PeriodicSnapshots&) = delete;

  void Start();
  void Stop();
  // Makes one snapshot now, points `latest` at it and deletes the oldest beyond `keep`;
  // returns its directory. What the thread does every interval.
  absl::StatusOr<std::string> MakeOne();

 private:
  const PeriodicSnapshotOptions options_;
  RocksDbStateStore* const store_;
  PeriodicSnapshotMetrics* const metrics_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace switchyard
