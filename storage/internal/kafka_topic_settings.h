#pragma once

// What the Kafka log asks of its topic: the configuration entries of a topic it creates, and
// the ways an existing topic falls short of what was asked. Pure, for kafka_event_log.cc and
// its tests.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/kafka_event_log.h"

namespace switchyard::storage_internal {

// An existing topic's settings as the cluster reports them; unset when they could not be read.
struct KafkaTopicSettings {
  std::optional<int16_t> replication_factor;  // the fewest replicas of any partition
  std::optional<int32_t> min_insync_replicas;
  std::optional<int64_t> retention_ms;  // -1: records are kept forever
  std::optional<std::string> cleanup_policy;
};

// The configuration entries of the topic Open creates, in the order they are set:
// cleanup.policy=delete always (compaction would drop delegation events the fold needs, and a
// compacted topic refuses the watermarks' empty keys), then min.insync.replicas and
// retention.ms when the options set them. The replication factor and the partition count are
// not entries: CreateTopics takes them apart.
std::vector<std::pair<std::string, std::string>> NewTopicConfig(
    const KafkaEventLogOptions& options);

// One sentence per way `found` is weaker than what `options` asks for a topic it would create:
// fewer replicas, a lower min.insync.replicas, a shorter retention, or compaction (whatever was
// asked). A setting not asked for, or not found, is not compared.
std::vector<std::string> WeakerTopicSettings(const KafkaEventLogOptions& options,
                                             const KafkaTopicSettings& found);

}  // namespace switchyard::storage_internal
