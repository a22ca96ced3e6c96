#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "engine/event_log.h"
#include "engine/fold.h"
#include "engine/snapshot.h"
#include "engine/state_store.h"

namespace switchyard {

struct FoldRunnerOptions {
  // Records folded per commit while catching up (a caught-up runner commits what it has). A
  // larger commit writes fewer state rows (an account touched twice is written once) and pays
  // the fixed cost of a commit fewer times; bench/README.md, "Larger commits".
  size_t max_batch_records = 100'000;
  // While catching up (a full batch read), a batch is written in two steps on two threads
  // of the runner's own, while the next one is read and folded on the fold thread: one
  // thread stages it (StateStore::Stage: builds its rows), the other applies it (makes it
  // durable: for table files, the fsyncs and the ingestion), so the staging of one batch
  // runs while the one before it is applied. At most two batches are in flight, applied in
  // order. A batch read to the end of the log is written before Step returns either way.
  bool pipelined_commits = true;
  absl::Duration poll_timeout = absl::Milliseconds(100);
  // While catching up, a new snapshot at most this often; when caught up, after every batch
  // that moves the applied slot or the limbo flag.
  absl::Duration publish_interval = absl::Milliseconds(50);
  absl::Duration error_backoff = absl::Milliseconds(200);
  FoldOptions fold;
};

// The fold's metrics, declared in one place.
struct FoldMetrics {
  explicit FoldMetrics(MetricsRegistry& registry);
  Counter& records;
  Counter& applied;
  Counter& ignored_stale;
  Counter& quarantined;
  Counter& commits;
  Counter& errors;
  Counter& commit_errors;
  Gauge& applied_slot;
  Gauge& in_limbo;
  Gauge& state_memtable_bytes;
  Gauge& state_block_cache_bytes;
  Gauge& log_hole;     // 1 while the log no longer holds a partition's next offset
  Counter& log_holes;  // holes found (once each, not once per retry)
  Histogram& commit_seconds;
};

// Where the log no longer holds the next record the state needs: its records from
// `next_offset` up to `start_offset` were deleted (Kafka retention, the embedded log's
// DropBefore). Folding on would skip them, so the runner refuses. A value type.
struct LogHole {
  int32_t partition = 0;
  int64_t next_offset = 0;   // the first record the state has not folded
  int64_t start_offset = 0;  // the first record the log still holds

  friend bool operator==(const LogHole&, const LogHole&) = default;
};

// What a hole means for the operator, for errors and /ready.
std::string LogHoleMessage(const LogHole& hole);

// Drives a Fold: reads the log from the state's stored offsets, folds, commits each batch to
// the StateStore, and publishes snapshots. Owns the fold's thread between Start() and
// Stop(); the other methods are for a caller that drives it on its own thread instead. Owns
// two commit threads for its whole life (FoldRunnerOptions::pipelined_commits): a snapshot is
// published only once the batch it shows is committed, so no reader sees a state that a
// crash could take back.
class FoldRunner {
 public:
  FoldRunner(FoldRunnerOptions options, EventLogReader* reader, StateStore* store,
             SnapshotHolder* snapshots, const Clock* clock, FoldMetrics* metrics = nullptr);
  ~FoldRunner();

  // Loads the state from the store, publishes it, and positions the reader.
  absl::Status Init();
  // Reads up to one batch (waiting up to `timeout` for the first record), folds and commits
  // it. Returns the number of records read. After an error, the next Step first reloads the
  // state from the store and repositions the reader. The first Step after Init, and every
  // Step while a hole is found, first asks the log where each partition starts: while one
  // starts past the state's next offset, Step reads nothing and returns FailedPrecondition
  // with LogHoleMessage.
  absl::StatusOr<size_t> Step(absl::Duration timeout);
  // Folds until every record that was in the log when called has been read, or, with a
  // stop slot, until every partition has sealed it.
  absl::Status RunUntilCaughtUp();

  // Runs Step in a thread until Stop(); errors are logged, counted and retried. While steps
  // fail (a full disk under the state store), the last published snapshot stays in place.
  void Start();
  // Stops Start()'s thread and waits for the batch in flight, if any, to be written.
  void Stop();
  // Why the last step of Start()'s thread failed; empty once a step succeeds again. Any
  // thread.
  std::string error() const;
  // The hole the last check found, if any. Any thread.
  std::optional<LogHole> log_hole() const;

  const Fold& fold() const { return *fold_; }

 private:
  // A batch to write, and the snapshot of the state after it when one is to be published.
  struct CommitJob {
    FoldBatch batch;
    std::shared_ptr<const Snapshot> snapshot;
  };
  // A staged batch to apply: what the metrics count and the snapshot to publish once it is.
  struct ApplyJob {
    std::unique_ptr<StagedCommit> staged;
    FoldPosition position;
    std::shared_ptr<const Snapshot> snapshot;
    absl::Duration staging;  // how long Stage took
  };

  absl::StatusOr<size_t> StepOnce(absl::Duration timeout);
  // Takes the fold's batch and commits it: on the commit threads while catching up, else
  // before returning. First waits for room (the batches in flight, when committing here)
  // and returns an error of one in flight, if any.
  absl::Status CommitAndPublish(bool caught_up);
  // Writes the job's batch on the fold thread, then as Committed.
  absl::Status RunCommit(const CommitJob& job);
  // Counts a committed batch, then publishes its snapshot. Fold or apply thread.
  void Committed(const FoldPosition& position, const std::shared_ptr<const Snapshot>& snapshot,
                 absl::Duration took);
  // Waits until no batch is in flight; the first error since the last call, once.
  absl::Status AwaitCommit();
  // Waits until the staging thread can take a batch; after an error, as AwaitCommit.
  absl::Status AwaitStaging();
  // The batch the staging thread last used, emptied, if not taken yet.
  std::optional<FoldBatch> TakeSpentBatch();
  void StageLoop();
  void ApplyLoop();
  // Compares each partition's start offset with the fold's read offset.
  absl::Status CheckLogStart();

  FoldRunnerOptions options_;
  EventLogReader* reader_;
  StateStore* store_;
  SnapshotHolder* snapshots_;
  const Clock* clock_;
  FoldMetrics* metrics_;
  std::unique_ptr<Fold> fold_;
  size_t uncommitted_records_ = 0;
  absl::Duration first_uncommitted_at_;  // when the first record of the batch was read
  bool needs_reload_ = false;
  bool recovering_ = false;  // a step failed and no commit succeeded since: no pipelining
  bool check_log_start_ = true;
  FoldCounters reported_;  // counters already added to the metrics
  Slot published_slot_ = 0;
  std::optional<Slot> published_limbo_;
  absl::Duration last_publish_ = absl::ZeroDuration();
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  mutable absl::Mutex error_mu_;
  std::string error_ ABSL_GUARDED_BY(error_mu_);
  std::optional<LogHole> hole_ ABSL_GUARDED_BY(error_mu_);

  absl::Mutex commit_mu_;
  std::optional<CommitJob> commit_job_ ABSL_GUARDED_BY(commit_mu_);  // handed over, not staged
  std::optional<ApplyJob> apply_job_ ABSL_GUARDED_BY(commit_mu_);    // staged, not applied
  // The last job's batch once staged, emptied on the staging thread, for Fold::Recycle.
  std::optional<FoldBatch> spent_batch_ ABSL_GUARDED_BY(commit_mu_);
  // The first failure of a batch in flight, until the fold thread reads it. While it is set,
  // the batches behind the failed one are dropped unwritten: none is applied past a hole.
  absl::Status commit_status_ ABSL_GUARDED_BY(commit_mu_);
  bool commit_stop_ ABSL_GUARDED_BY(commit_mu_) = false;
  std::thread commit_thread_;  // stages
  std::thread apply_thread_;
};

}  // namespace switchyard
