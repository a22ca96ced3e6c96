#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/event_log.h"

struct rd_kafka_s;

namespace switchyard {

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
};

// The delegation event log on Apache Kafka (librdkafka). The producer is idempotent with
// acks=all; Append returns only when every record's delivery report says it was written.
// Keyed records go to the partition the key hashes to; records with a partition go there.
// Readers assign every partition explicitly (no consumer group offsets): positions come from
// the state store. Thread-safe; readers are used by one thread each.
class KafkaEventLog final : public EventLog {
 public:
  // Connects, creates the topic when it is missing (where the broker allows it), and reads
  // its partition count. An unreachable broker or a missing topic that cannot be created is
  // an Unavailable or NotFound error naming the broker list and the topic.
  static absl::StatusOr<std::unique_ptr<KafkaEventLog>> Open(const KafkaEventLogOptions& options);
  ~KafkaEventLog() override;

  int32_t partition_count() const override { return partition_count_; }
  absl::Status Append(std::span<const OutgoingRecord> records) override;

  // A reader of every partition, positioned at offset 0.
  absl::StatusOr<std::unique_ptr<EventLogReader>> OpenReader() override;

 private:
  class Reader;
  KafkaEventLog(KafkaEventLogOptions options, rd_kafka_s* producer, int32_t partitions);

  const KafkaEventLogOptions options_;
  rd_kafka_s* producer_;
  const int32_t partition_count_;
};

}  // namespace switchyard
