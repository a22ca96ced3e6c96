#pragma once

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "engine/event_log.h"

namespace rocksdb {
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace switchyard {
namespace storage_internal {
class Database;
}  // namespace storage_internal

struct EmbeddedEventLogOptions {
  // fsync on every append, so an acknowledged record survives power loss.
  bool sync_appends = true;
  bool create_if_missing = true;
  // Set after each append to the bytes the log's memtables hold (RSS that grows with every
  // append until RocksDB flushes them at their write-buffer size); optional.
  Gauge* memtable_bytes = nullptr;
};

// The event log on one machine: one partition, records in a RocksDB column family keyed by
// their sequence number (big-endian u64, from 0). Append is the producer side; NewReader
// makes consumers; DropBefore is retention. The log outlives its readers. Thread-safe.
class EmbeddedEventLog final : public EventLog {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedEventLog>> Open(
      const std::string& path, const EmbeddedEventLogOptions& options = {});
  ~EmbeddedEventLog() override;

  int32_t partition_count() const override { return 1; }
  absl::Status Append(std::span<const OutgoingRecord> records) override;

  // A reader positioned at offset 0.
  std::unique_ptr<EventLogReader> NewReader();
  absl::StatusOr<std::unique_ptr<EventLogReader>> OpenReader() override { return NewReader(); }
  // The sequence number the next record will get.
  int64_t end_offset() const;
  // The first sequence number the log still holds (end_offset() when it holds none).
  int64_t start_offset() const;
  // Deletes every record before `offset` (at most up to end_offset()), durably: retention.
  // A reader positioned below the new start finds a hole (DataLoss) and StartOffset says
  // where the log starts now. Numbering goes on from end_offset(), across reopens too.
  absl::Status DropBefore(int64_t offset);

 private:
  class Reader;
  EmbeddedEventLog(std::unique_ptr<storage_internal::Database> database, int64_t start, int64_t end,
                   const EmbeddedEventLogOptions& options);
  // Waits until the log holds a record at `offset` or `timeout` passes.
  bool WaitForOffset(int64_t offset, absl::Duration timeout) const;

  std::unique_ptr<storage_internal::Database> database_;
  rocksdb::ColumnFamilyHandle* log_cf_;
  const bool sync_appends_;
  Gauge* const memtable_bytes_;
  mutable absl::Mutex mu_;
  int64_t start_ ABSL_GUARDED_BY(mu_);
  int64_t end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace switchyard
