#pragma once

// The Kafka log's dealings with its topic through the admin API: creating it with the
// configured settings, reading its partitions and replicas, and warning about an existing
// topic's weaker settings.

#include <librdkafka/rdkafka.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/kafka_event_log.h"

namespace switchyard::storage_internal {

// Creates the topic with the configured partitions, replication factor (-1: the broker's
// default) and the entries of NewTopicConfig. OK when it exists already.
absl::Status CreateTopic(rd_kafka_t* rk, const KafkaEventLogOptions& options);

// What the cluster's metadata says of the topic.
struct TopicMetadata {
  int32_t partitions = 0;
  int16_t fewest_replicas = 0;  // over its partitions
};

// The topic's partition count and replicas from the cluster's metadata. NotFound when the topic
// does not exist; Unavailable (or DeadlineExceeded) when no broker answered.
absl::StatusOr<TopicMetadata> ReadTopicMetadata(rd_kafka_t* rk, const KafkaEventLogOptions& options,
                                                absl::Duration timeout);

// Warns about each setting of an existing topic weaker than the options ask for. Nothing is
// checked when they ask for nothing, and what cannot be read is not checked (a client not
// allowed DescribeConfigs; librdkafka's mock cluster, which does not answer it).
void WarnAboutWeakerTopicSettings(rd_kafka_t* rk, const KafkaEventLogOptions& options,
                                  const TopicMetadata& metadata);

}  // namespace switchyard::storage_internal
