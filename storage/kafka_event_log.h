#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
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
};

struct KafkaEventLogOptions {
  std::string brokers;  // bootstrap.servers
  std::string topic = "switchyard.delegations";
  // Partitions of the topic when this log creates it; an existing topic keeps its own.
  int32_t partitions = 12;
  int16_t replication_factor = 1;
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
// leader that moved) are logged and counted, not returned. Thread-safe; each reader is used
// by one thread at a time.
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

 private:
  class Reader;
  KafkaEventLog(KafkaEventLogOptions options, std::unique_ptr<KafkaClientContext> context,
                rd_kafka_s* producer, int32_t partitions);

  const KafkaEventLogOptions options_;
  std::unique_ptr<KafkaClientContext> context_;  // the producer's callbacks' state
  rd_kafka_s* producer_;
  const int32_t partition_count_;
};

}  // namespace switchyard
