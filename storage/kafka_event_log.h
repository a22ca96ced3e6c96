#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "engine/event_log.h"

struct rd_kafka_s;

namespace switchyard {

struct KafkaClientContext;  // the state of a client's callbacks (kafka_event_log.cc)

// The Kafka log's metrics, declared in one place. Made once per process by its owner.
struct KafkaLogMetrics {
  explicit KafkaLogMetrics(MetricsRegistry& registry);
  Counter& records_produced;
  Counter& delivery_failures;
  Counter& client_errors;
  Counter& consumer_transient_errors;
  Histogram& append_seconds;
  Counter& producer_recreations;
};

struct KafkaEventLogOptions {
  std::string brokers;  // bootstrap.servers
  std::string topic = "switchyard.delegations";
  // Partitions of the topic when this log creates it; an existing topic keeps its own.
  int32_t partitions = 12;
  // Settings of the topic when this log creates it; unset, the broker's own defaults apply
  // (default.replication.factor, min.insync.replicas, log.retention.ms). The topic is always
  // created with cleanup.policy=delete. An existing topic keeps its settings; when any of these
  // is set, Open warns about each of its settings weaker than asked, or compacted.
  std::optional<int16_t> replication_factor;
  std::optional<int32_t> min_insync_replicas;
  std::optional<int64_t> retention_ms;  // -1: keep every record
  absl::Duration request_timeout = absl::Seconds(10);
  // How long Append waits for its delivery reports.
  absl::Duration delivery_timeout = absl::Seconds(30);
  // Further librdkafka properties, applied last.
  std::vector<std::pair<std::string, std::string>> properties;
  // Where the log counts what it does; nothing is counted when null. Must outlive the log
  // and its readers.
  KafkaLogMetrics* metrics = nullptr;
};

// The delegation event log on Apache Kafka (librdkafka). The producer is idempotent with
// acks=all; Append returns only when every record's delivery report says it was written, and
// it produces a record with an explicit partition (SlotSealed, StreamGap, Resynced, broadcast
// to every partition) only once every record before it in the same Append is acknowledged,
// so a watermark never reaches the log ahead of the events it covers.
// Keyed records go to the partition the key hashes to; records with a partition go there.
// Readers assign every partition explicitly (no consumer group offsets): positions come from
// the state store. Errors librdkafka recovers from by itself (a broker that went away, a
// leader that moved) are logged and counted, not returned.
//
// A fatal producer error (the idempotent producer lost track of its sequence numbers) is not
// returned either: Append destroys the producer, makes a new one, reads back the partitions
// its unacknowledged records went to, from where they ended when the Append began, and
// produces again only the records it does not find there, so each record reaches the topic
// once and in order. That relies on this log being the topic's only writer (ingest). Counted
// in switchyard_kafka_producer_recreated_total.
//
// Thread-safe: Appends run one at a time. Each reader is used by one thread at a time.
class KafkaEventLog final : public EventLog {
 public:
  // Connects and reads the topic's partition count. A missing topic is created with
  // `options.partitions` (the client never asks the broker to auto-create it with the
  // broker's default count). Errors name the broker list and the topic: Unavailable when no
  // broker answers, NotFound when the topic is missing and cannot be created. Both are worth
  // retrying; the caller decides how long.
  static absl::StatusOr<std::unique_ptr<KafkaEventLog>> Open(const KafkaEventLogOptions& options);
  ~KafkaEventLog() override;

  int32_t partition_count() const override { return partition_count_; }
  absl::Status Append(std::span<const OutgoingRecord> records) override;

  // A reader of every partition, positioned at offset 0.
  absl::StatusOr<std::unique_ptr<EventLogReader>> OpenReader() override;

  // The producer's librdkafka handle, for tests that inject faults into it (such as
  // rd_kafka_test_fatal_error). Valid until Append replaces the producer after a fatal error.
  rd_kafka_s* producer_for_testing() const;

 private:
  class Reader;
  struct AppendProgress;
  KafkaEventLog(KafkaEventLogOptions options, std::unique_ptr<KafkaClientContext> context,
                rd_kafka_s* producer, int32_t partitions);

  rd_kafka_s* producer() const;
  absl::Status AppendLocked(std::span<const OutgoingRecord> records, AppendProgress& progress)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(append_mu_);
  // Replaces a producer that hit a fatal error: purges what it still holds (serving the
  // delivery reports), destroys it and makes a new one.
  absl::Status RecreateProducer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(append_mu_);
  // After a recreation: reads back the end of each partition where records of this Append
  // may be without an acknowledgement, and marks those found there as written.
  absl::Status FindWrittenRecords(std::span<const OutgoingRecord> records, AppendProgress& progress)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(append_mu_);

  const KafkaEventLogOptions options_;
  std::unique_ptr<KafkaClientContext> context_;  // the producer's callbacks' state
  const int32_t partition_count_;
  absl::Mutex append_mu_;  // one Append at a time
  // Per partition, the offset past the last record this log knows is there, from the delivery
  // reports of successful Appends. Forgotten after a failed Append, whose records may still be
  // on their way.
  std::vector<std::optional<int64_t>> partition_ends_ ABSL_GUARDED_BY(append_mu_);
  mutable absl::Mutex producer_mu_;  // replaced under append_mu_ and producer_mu_
  rd_kafka_s* producer_ ABSL_GUARDED_BY(producer_mu_);
};

}  // namespace switchyard
