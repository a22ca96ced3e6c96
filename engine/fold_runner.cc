#include "engine/fold_runner.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace switchyard {

FoldMetrics::FoldMetrics(MetricsRegistry& r)
    : records(r.AddCounter("switchyard_fold_records_total", "Log records read by the fold")),
      applied(r.AddCounter("switchyard_fold_events_applied_total",
                           "Account events that changed the delegation state")),
      ignored_stale(r.AddCounter("switchyard_fold_events_ignored_stale_total",
                                 "Account events ignored as older than the account's last event")),
      quarantined(r.AddCounter("switchyard_fold_records_quarantined_total",
                               "Log records that failed to decode and were quarantined")),
      commits(r.AddCounter("switchyard_fold_commits_total", "Fold batches committed")),
      errors(
          r.AddCounter("switchyard_fold_errors_total", "Fold steps that failed and were retried")),
      commit_errors(
          r.AddCounter("switchyard_fold_commit_errors_total",
                       "Fold batches the state store failed to write (a full disk, an I/O error)")),
      applied_slot(r.AddGauge("switchyard_fold_applied_slot", "The applied slot")),
      in_limbo(r.AddGauge("switchyard_fold_in_limbo",
                          "1 between a StreamGap and the next Resynced, else 0")),
      state_memtable_bytes(r.AddGauge(
          "switchyard_state_memtable_bytes",
          "The state store's write buffers (memtables), which grow with writes until a flush")),
      state_block_cache_bytes(
          r.AddGauge("switchyard_state_block_cache_bytes", "The state store's block cache in use")),
      log_hole(r.AddGauge("switchyard_fold_log_hole",
                          "1 while the log no longer holds the next record of a partition the "
                          "state needs (retention deleted it); the fold is stopped, else 0")),
      log_holes(r.AddCounter("switchyard_fold_log_holes_total",
                             "Holes found in the log at the state's next offset")),
      commit_seconds(r.AddHistogram("switchyard_fold_commit_seconds",
                                    "Time to write one fold batch", LatencyBucketsSeconds())) {}

std::string LogHoleMessage(const LogHole& hole) {
  return absl::StrCat("log hole: partition ", hole.partition, " starts at offset ",
                      hole.start_offset, " but the state's next offset there is ", hole.next_offset,
                      "; records ", hole.next_offset, " to ", hole.start_offset - 1,
                      " are gone from the log (retention), so the fold stops here rather than "
                      "skip them. Bootstrap this replica from a snapshot taken at or after "
                      "offset ",
                      hole.start_offset, " (switchyard snapshot restore, serve --bootstrap-from)");
}

FoldRunner::FoldRunner(FoldRunnerOptions options, EventLogReader* reader, StateStore* store,
                       SnapshotHolder* snapshots, const Clock* clock, FoldMetrics* metrics)
    : options_(options),
      reader_(reader),
      store_(store),
      snapshots_(snapshots),
      clock_(clock),
      metrics_(metrics) {
  if (options_.pipelined_commits) {
    commit_thread_ = std::thread([this] { StageLoop(); });
    apply_thread_ = std::thread([this] { ApplyLoop(); });
  }
}

FoldRunner::~FoldRunner() {
  Stop();
  if (commit_thread_.joinable()) {
    {
      absl::MutexLock lock(&commit_mu_);
      commit_stop_ = true;
    }
    commit_thread_.join();
    apply_thread_.join();
  }
}

absl::Status FoldRunner::Init() {
  // A batch still in flight is written (or fails) before the state is read back.
  AwaitCommit().IgnoreError();
  uncommitted_records_ = 0;
  check_log_start_ = true;
  ASSIGN_OR_RETURN(LoadedState loaded, store_->Load());
  fold_ = std::make_unique<Fold>(options_.fold, std::move(loaded), reader_->partition_count());
  for (int32_t p = 0; p < fold_->partition_count(); ++p) {
    RETURN_IF_ERROR(reader_->Seek(p, fold_->read_offset(p)));
  }
  reported_ = fold_->position().counters;
  published_slot_ = fold_->position().applied_slot;
  published_limbo_ = fold_->position().LimboSince();
  last_publish_ = clock_->Monotonic();
  if (snapshots_ != nullptr) snapshots_->Publish(fold_->MakeSnapshot());
  if (metrics_ != nullptr) {
    metrics_->applied_slot.Set(static_cast<int64_t>(published_slot_));
    metrics_->in_limbo.Set(published_limbo_ ? 1 : 0);
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> FoldRunner::Step(absl::Duration timeout) {
  if (needs_reload_) {
    // A failed step may have lost a batch the fold already took: start again from what the
    // store holds, so that nothing is skipped or applied twice.
    RETURN_IF_ERROR(Init());
    needs_reload_ = false;
  }
  // Nothing was read: no reload is needed, only the check again.
  if (check_log_start_) RETURN_IF_ERROR(CheckLogStart());
  absl::StatusOr<size_t> read = StepOnce(timeout);
  if (!read.ok()) needs_reload_ = recovering_ = true;
  return read;
}

absl::Status FoldRunner::CheckLogStart() {
  std::optional<LogHole> hole;
  for (int32_t p = 0; p < fold_->partition_count() && !hole; ++p) {
    ASSIGN_OR_RETURN(const int64_t start, reader_->StartOffset(p));
    if (start > fold_->read_offset(p)) hole = LogHole{p, fold_->read_offset(p), start};
  }
  bool found = false;
  {
    absl::MutexLock lock(&error_mu_);
    found = hole && hole != hole_;
    hole_ = hole;
  }
  if (metrics_ != nullptr) {
    metrics_->log_hole.Set(hole ? 1 : 0);
    if (found) metrics_->log_holes.Increment();
  }
  if (hole) return absl::FailedPreconditionError(LogHoleMessage(*hole));
  check_log_start_ = false;
  return absl::OkStatus();
}

absl::StatusOr<size_t> FoldRunner::StepOnce(absl::Duration timeout) {
  for (int32_t p = 0; p < fold_->partition_count(); ++p) reader_->Pause(p, fold_->Saturated(p));
  const size_t room = options_.max_batch_records - uncommitted_records_;
  ASSIGN_OR_RETURN(size_t read, reader_->Poll(room, timeout, [this](const LogRecordView& r) {
    fold_->Add(r.partition, r.offset, r.payload);
    ++uncommitted_records_;
  }));
  if (metrics_ != nullptr) metrics_->records.Increment(read);
  const absl::Duration now = clock_->Monotonic();
  if (uncommitted_records_ > 0 && uncommitted_records_ == read) first_uncommitted_at_ = now;
  // A short read is the end of the log only when the reader knows of nothing more; a reader
  // whose next records are still on the way (Kafka's fetches) is read on, into a fuller batch,
  // for at most publish_interval.
  const bool caught_up = read < room && reader_->AtEnd();
  const bool overdue = read < room && uncommitted_records_ > 0 &&
                       now - first_uncommitted_at_ >= options_.publish_interval;
  if (uncommitted_records_ >= options_.max_batch_records || caught_up || overdue) {
    RETURN_IF_ERROR(CommitAndPublish(read < room));
  }
  return read;
}

absl::Status FoldRunner::CommitAndPublish(bool caught_up) {
  // After a failed step the batches are written on this thread until one succeeds, so that a
  // failing store (a full disk) fails the step that tried it, not the next one.
  const bool pipelined =
      !caught_up && commit_thread_.joinable() && !recovering_ && uncommitted_records_ > 0;
  RETURN_IF_ERROR(pipelined ? AwaitStaging() : AwaitCommit());
  // While catching up, the next batch reuses the memory of the one just written. Once caught
  // up, the batches are small: a spent batch is dropped, so that its memory is given back.
  if (std::optional<FoldBatch> spent = TakeSpentBatch(); spent && !caught_up) {
    fold_->Recycle(*std::move(spent));
  }
  const FoldPosition& position = fold_->position();
  const bool changed =
      position.applied_slot != published_slot_ || position.LimboSince() != published_limbo_;
  const absl::Duration now = clock_->Monotonic();
  CommitJob job;
  // Without a holder (`switchyard fold`, replay) nobody reads a snapshot, and making one would
  // only make the next batch's writes copy the map's shards it shares.
  if (snapshots_ != nullptr && changed &&
      (caught_up || now - last_publish_ >= options_.publish_interval)) {
    job.snapshot = fold_->MakeSnapshot();
    published_slot_ = position.applied_slot;
    published_limbo_ = position.LimboSince();
    last_publish_ = now;
  }
  if (uncommitted_records_ == 0) {
    if (job.snapshot != nullptr) snapshots_->Publish(job.snapshot);
    return absl::OkStatus();
  }
  job.batch = fold_->TakeBatch();
  uncommitted_records_ = 0;
  if (pipelined) {
    absl::MutexLock lock(&commit_mu_);
    commit_job_ = std::move(job);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(RunCommit(job));
  recovering_ = false;
  if (!caught_up) fold_->Recycle(std::move(job.batch));
  return absl::OkStatus();
}

absl::Status FoldRunner::RunCommit(const CommitJob& job) {
  const absl::Duration start = clock_->Monotonic();
  if (absl::Status s = store_->Commit(job.batch); !s.ok()) {
    if (metrics_ != nullptr) metrics_->commit_errors.Increment();
    return s;
  }
  Committed(job.batch.position, job.snapshot, clock_->Monotonic() - start);
  return absl::OkStatus();
}

void FoldRunner::Committed(const FoldPosition& position,
                           const std::shared_ptr<const Snapshot>& snapshot, absl::Duration took) {
  if (metrics_ != nullptr) {
    const FoldCounters& now = position.counters;
    metrics_->commits.Increment();
    metrics_->commit_seconds.Observe(absl::ToDoubleSeconds(took));
    metrics_->applied.Increment(now.applied - reported_.applied);
    metrics_->ignored_stale.Increment(now.ignored_stale - reported_.ignored_stale);
    metrics_->quarantined.Increment(now.quarantined - reported_.quarantined);
    reported_ = now;
    const StateStore::Memory memory = store_->MemoryUsage();
    metrics_->state_memtable_bytes.Set(static_cast<int64_t>(memory.memtables));
    metrics_->state_block_cache_bytes.Set(static_cast<int64_t>(memory.block_cache));
    metrics_->applied_slot.Set(static_cast<int64_t>(position.applied_slot));
    metrics_->in_limbo.Set(position.LimboSince() ? 1 : 0);
  }
  if (snapshot != nullptr) snapshots_->Publish(snapshot);
}

std::optional<FoldBatch> FoldRunner::TakeSpentBatch() {
  absl::MutexLock lock(&commit_mu_);
  std::optional<FoldBatch> spent = std::move(spent_batch_);
  spent_batch_.reset();
  return spent;
}

absl::Status FoldRunner::AwaitCommit() {
  absl::MutexLock lock(&commit_mu_);
  auto idle = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_) { return !commit_job_ && !apply_job_; };
  commit_mu_.Await(absl::Condition(&idle));
  absl::Status status = std::move(commit_status_);
  commit_status_ = absl::OkStatus();
  return status;
}

absl::Status FoldRunner::AwaitStaging() {
  {
    absl::MutexLock lock(&commit_mu_);
    auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_) { return !commit_job_; };
    commit_mu_.Await(absl::Condition(&room));
    if (commit_status_.ok()) return absl::OkStatus();
  }
  // A batch in flight failed: the error is returned once nothing is in flight, so that the
  // reload that follows reads the store as the last applied batch left it.
  return AwaitCommit();
}

void FoldRunner::StageLoop() {
  auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_) {
    return commit_job_.has_value() || commit_stop_;
  };
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_) { return !apply_job_; };
  for (;;) {
    CommitJob* job = nullptr;
    bool failed = false;
    {
      absl::MutexLock lock(&commit_mu_);
      commit_mu_.Await(absl::Condition(&work));
      if (!commit_job_) return;  // stopping, nothing in flight
      job = &*commit_job_;
      failed = !commit_status_.ok();
    }
    // The fold thread waits for this job (AwaitStaging) before it touches the job again, so
    // the job is used here without the lock. Behind a failed batch, it is dropped unwritten.
    const absl::Duration start = clock_->Monotonic();
    absl::StatusOr<std::unique_ptr<StagedCommit>> staged =
        failed ? absl::AbortedError("a batch before it failed") : store_->Stage(job->batch);
    ApplyJob next;
    if (staged.ok()) {
      next = {*std::move(staged), job->batch.position, std::move(job->snapshot),
              clock_->Monotonic() - start};
    } else if (!failed && metrics_ != nullptr) {
      metrics_->commit_errors.Increment();
    }
    // Emptied here, not on the fold thread: freeing a batch's records is a free() per event.
    FoldBatch spent = std::move(job->batch);
    spent.Clear();
    absl::MutexLock lock(&commit_mu_);
    if (!staged.ok() && commit_status_.ok()) commit_status_ = staged.status();
    if (next.staged != nullptr) {
      commit_mu_.Await(absl::Condition(&room));
      // Applied only if every batch before it was: a failure meanwhile drops it.
      if (commit_status_.ok()) apply_job_ = std::move(next);
    }
    spent_batch_ = std::move(spent);
    commit_job_.reset();
  }
}

void FoldRunner::ApplyLoop() {
  auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_) {
    return apply_job_.has_value() || commit_stop_;
  };
  for (;;) {
    ApplyJob* job = nullptr;
    {
      absl::MutexLock lock(&commit_mu_);
      commit_mu_.Await(absl::Condition(&work));
      if (!apply_job_) return;  // stopping, nothing in flight
      job = &*apply_job_;
    }
    const absl::Duration start = clock_->Monotonic();
    absl::Status status = job->staged->Apply();
    if (status.ok()) {
      Committed(job->position, job->snapshot, job->staging + (clock_->Monotonic() - start));
    } else if (metrics_ != nullptr) {
      metrics_->commit_errors.Increment();
    }
    job->staged.reset();  // a failed commit's files are removed here, outside the lock
    absl::MutexLock lock(&commit_mu_);
    if (!status.ok() && commit_status_.ok()) commit_status_ = std::move(status);
    apply_job_.reset();
  }
}

absl::Status FoldRunner::RunUntilCaughtUp() {
  std::vector<int64_t> ends(fold_->partition_count());
  for (int32_t p = 0; p < fold_->partition_count(); ++p) {
    ASSIGN_OR_RETURN(ends[p], reader_->EndOffset(p));
  }
  auto done = [&] {
    if (fold_->ReachedStop()) return true;
    for (int32_t p = 0; p < fold_->partition_count(); ++p) {
      if (fold_->read_offset(p) < ends[p]) return false;
    }
    return true;
  };
  while (!done()) {
    ASSIGN_OR_RETURN(size_t read, Step(options_.poll_timeout));
    if (read == 0 && !done()) {
      // Every unread partition is paused behind a full queue that cannot drain: the other
      // partitions never sealed the slots it waits for.
      bool all_saturated = true;
      for (int32_t p = 0; p < fold_->partition_count(); ++p) {
        if (fold_->read_offset(p) < ends[p] && !fold_->Saturated(p)) all_saturated = false;
      }
      if (all_saturated) {
        return absl::FailedPreconditionError(
            "fold cannot make progress: partitions wait for slots the others never sealed");
      }
    }
  }
  return CommitAndPublish(/*caught_up=*/true);
}

void FoldRunner::Start() {
  stopping_ = false;
  thread_ = std::thread([this] {
    uint64_t failed_steps = 0;
    while (!stopping_.load()) {
      absl::StatusOr<size_t> read = Step(options_.poll_timeout);
      if (read.ok()) {
        if (failed_steps > 0) {
          spdlog::info("fold resumed after {} failed steps, at applied slot {}", failed_steps,
                       fold_->position().applied_slot);
          absl::MutexLock lock(&error_mu_);
          error_.clear();
        }
        failed_steps = 0;
        continue;
      }
      if (metrics_ != nullptr) metrics_->errors.Increment();
      const std::string message = read.status().ToString();
      bool changed = false;
      {
        absl::MutexLock lock(&error_mu_);
        changed = error_ != message;
        error_ = message;
      }
      // Once per distinct error, not once per retry: a full disk fails every step.
      if (changed) {
        spdlog::error("fold stopped, serving the last snapshot and retrying every {}: {}",
                      absl::FormatDuration(options_.error_backoff), message);
      }
      ++failed_steps;
      absl::SleepFor(options_.error_backoff);
    }
  });
}

std::string FoldRunner::error() const {
  absl::MutexLock lock(&error_mu_);
  return error_;
}

std::optional<LogHole> FoldRunner::log_hole() const {
  absl::MutexLock lock(&error_mu_);
  return hole_;
}

void FoldRunner::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  // The batch in flight is written before the caller may close the store.
  if (absl::Status s = AwaitCommit(); !s.ok()) {
    spdlog::error("fold: the last batch was not committed ({}); it is folded again at start",
                  s.ToString());
  }
}

}  // namespace switchyard
