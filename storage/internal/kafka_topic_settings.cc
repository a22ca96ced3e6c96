#include "storage/internal/kafka_topic_settings.h"

#include <fmt/format.h>

#include <string_view>

namespace switchyard::storage_internal {
namespace {

std::string RetentionText(int64_t ms) {
  return ms < 0 ? std::string("forever") : fmt::format("for {} ms", ms);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> NewTopicConfig(
    const KafkaEventLogOptions& options) {
  std::vector<std::pair<std::string, std::string>> config = {{"cleanup.policy", "delete"}};
  if (options.min_insync_replicas.has_value()) {
    config.emplace_back("min.insync.replicas", std::to_string(*options.min_insync_replicas));
  }
  if (options.retention_ms.has_value()) {
    config.emplace_back("retention.ms", std::to_string(*options.retention_ms));
  }
  return config;
}

std::vector<std::string> WeakerTopicSettings(const KafkaEventLogOptions& options,
                                             const KafkaTopicSettings& found) {
  std::vector<std::string> weaker;
  const std::string& topic = options.topic;
  if (options.replication_factor && found.replication_factor &&
      *found.replication_factor < *options.replication_factor) {
    weaker.push_back(fmt::format(
        "topic {} has {} replica(s) of a partition, fewer than kafka_replication_factor = {}: "
        "a broker lost can lose acknowledged events",
        topic, *found.replication_factor, *options.replication_factor));
  }
  if (options.min_insync_replicas && found.min_insync_replicas &&
      *found.min_insync_replicas < *options.min_insync_replicas) {
    weaker.push_back(fmt::format(
        "topic {} has min.insync.replicas = {}, lower than kafka_min_insync_replicas = {}: an "
        "append is acknowledged with fewer copies written",
        topic, *found.min_insync_replicas, *options.min_insync_replicas));
  }
  if (options.retention_ms && found.retention_ms && *found.retention_ms >= 0 &&
      (*options.retention_ms < 0 || *found.retention_ms < *options.retention_ms)) {
    weaker.push_back(fmt::format(
        "topic {} keeps records {}, not {} as kafka_retention_ms asks: a replica must then "
        "start from a snapshot taken within that time",
        topic, RetentionText(*found.retention_ms), RetentionText(*options.retention_ms)));
  }
  if (found.cleanup_policy && found.cleanup_policy->find("compact") != std::string_view::npos) {
    weaker.push_back(fmt::format(
        "topic {} has cleanup.policy = {}: compaction drops delegation events the fold needs; "
        "the topic must use cleanup.policy = delete",
        topic, *found.cleanup_policy));
  }
  return weaker;
}

}  // namespace switchyard::storage_internal
