#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/event.h"

namespace switchyard {

// A record to append. Account events are keyed by their account, which picks the
// partition; `partition` overrides the key, for the records written to every partition.
struct OutgoingRecord {
  std::string key;
  std::string payload;
  std::optional<int32_t> partition;
};

// The records that put `event` on a log of `partition_count` partitions: account events once,
// keyed by their account; SlotSealed, StreamGap and Resynced once per partition, since every
// partition must carry the watermarks and stream markers (docs/architecture.md §5).
std::vector<OutgoingRecord> ToLogRecords(const Event& event, int32_t partition_count);

// A record read from the log; the views are valid during the callback only.
struct LogRecordView {
  int32_t partition = 0;
  int64_t offset = 0;
  std::string_view payload;
};

// The producer side of the delegation event log. Implementations: storage/EmbeddedEventLog
// and storage/KafkaEventLog. Thread-safe.
class EventLogWriter {
 public:
  virtual ~EventLogWriter() = default;
  virtual int32_t partition_count() const = 0;
  // Appends `records` in order and returns once the log has acknowledged every one of them;
  // an error means some may not have been written.
  virtual absl::Status Append(std::span<const OutgoingRecord> records) = 0;
};

// The consumer side: reads every partition from positions the caller keeps (the state
// store's offsets, not the log's). One thread at a time.
class EventLogReader {
 public:
  virtual ~EventLogReader() = default;
  virtual int32_t partition_count() const = 0;
  // The next Poll reads `partition` from `offset`.
  virtual absl::Status Seek(int32_t partition, int64_t offset) = 0;
  // Stops or resumes reading `partition` (back-pressure).
  virtual void Pause(int32_t partition, bool paused) = 0;
  // Calls `on_record` for up to `max_records` records, in offset order within each
  // partition, waiting up to `timeout` for the first. Returns how many it delivered.
  virtual absl::StatusOr<size_t> Poll(size_t max_records, absl::Duration timeout,
                                      absl::FunctionRef<void(const LogRecordView&)> on_record) = 0;
  // The offset one past the last record of `partition` now.
  virtual absl::StatusOr<int64_t> EndOffset(int32_t partition) = 0;
  // Whether the reader has delivered every record of its unpaused partitions that it knows
  // the log holds, from what it already knows (no I/O; Kafka: the high watermarks of the last
  // fetch answers). When Poll returns fewer records than asked for, a reader that is not at
  // its end has more on the way (the fold keeps reading instead of committing a short batch).
  // A reader that cannot tell says true.
  virtual bool AtEnd() { return true; }
  // The first offset `partition` still holds now: 0 until retention (Kafka) or DropBefore
  // (the embedded log) deletes its early records. A state whose next offset is below it
  // cannot be folded further from this log (docs/architecture.md §7, "Log holes").
  virtual absl::StatusOr<int64_t> StartOffset(int32_t partition) = 0;
};

// A whole log: the producer side, and readers for folding engines. Implemented by
// storage/EmbeddedEventLog and storage/KafkaEventLog; the engine cannot tell them apart.
class EventLog : public EventLogWriter {
 public:
  // A reader of every partition, positioned at offset 0.
  virtual absl::StatusOr<std::unique_ptr<EventLogReader>> OpenReader() = 0;
};

}  // namespace switchyard
