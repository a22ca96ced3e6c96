#include "storage/internal/kafka_topic_admin.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <string>

#include "absl/strings/numbers.h"
#include "common/status.h"
#include "storage/internal/kafka_client.h"
#include "storage/internal/kafka_topic_settings.h"

namespace switchyard::storage_internal {
namespace {

// One admin API request: its options (the request timeout) and the queue its answer comes
// on. Freed with it.
class AdminRequest {
 public:
  AdminRequest(rd_kafka_t* rk, rd_kafka_admin_op_t op, absl::Duration timeout)
      : queue_(rd_kafka_queue_new(rk)),
        options_(rd_kafka_AdminOptions_new(rk, op)),
        timeout_ms_(TimeoutMs(timeout)) {
    char error[512];
    rd_kafka_AdminOptions_set_request_timeout(options_, timeout_ms_, error, sizeof(error));
  }
  ~AdminRequest() {
    rd_kafka_AdminOptions_destroy(options_);
    rd_kafka_queue_destroy(queue_);
  }
  AdminRequest(const AdminRequest&) = delete;
  AdminRequest& operator=(const AdminRequest&) = delete;

  rd_kafka_AdminOptions_t* options() const { return options_; }
  rd_kafka_queue_t* queue() const { return queue_; }
  // The answer (the caller destroys it), or null when none came within the timeout and a
  // second more.
  rd_kafka_event_t* Wait() const { return rd_kafka_queue_poll(queue_, timeout_ms_ + 1000); }

 private:
  rd_kafka_queue_t* queue_;
  rd_kafka_AdminOptions_t* options_;
  int timeout_ms_;
};

// The topic Open creates: the configured partitions and replication factor (-1: the broker's
// default) and the entries of NewTopicConfig.
absl::StatusOr<rd_kafka_NewTopic_t*> NewTopic(const KafkaEventLogOptions& options) {
  char error[512];
  rd_kafka_NewTopic_t* topic =
      rd_kafka_NewTopic_new(options.topic.c_str(), options.partitions,
                            options.replication_factor.value_or(-1), error, sizeof(error));
  if (topic == nullptr) return absl::InvalidArgumentError(fmt::format("new topic: {}", error));
  for (const auto& [name, value] : NewTopicConfig(options)) {
    if (const rd_kafka_resp_err_t err =
            rd_kafka_NewTopic_set_config(topic, name.c_str(), value.c_str());
        err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_NewTopic_destroy(topic);
      return FromKafka(err, fmt::format("topic setting {} = {}", name, value));
    }
  }
  return topic;
}

// The topic's configuration entries that WeakerTopicSettings compares, from
// DescribeConfigs. An error when the cluster does not answer it.
absl::Status ReadTopicConfig(rd_kafka_t* rk, const KafkaEventLogOptions& options,
                             KafkaTopicSettings* settings) {
  rd_kafka_ConfigResource_t* resource =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, options.topic.c_str());
  const AdminRequest request(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, options.request_timeout);
  rd_kafka_DescribeConfigs(rk, &resource, 1, request.options(), request.queue());
  rd_kafka_event_t* event = request.Wait();
  absl::Status status = absl::DeadlineExceededError("the broker did not answer DescribeConfigs");
  if (event != nullptr) {
    status = FromKafka(rd_kafka_event_error(event), "DescribeConfigs");
    size_t count = 0;
    const rd_kafka_ConfigResource_t** resources =
        status.ok() ? rd_kafka_DescribeConfigs_result_resources(
                          rd_kafka_event_DescribeConfigs_result(event), &count)
                    : nullptr;
    for (size_t i = 0; i < count && status.ok(); ++i) {
      status = FromKafka(rd_kafka_ConfigResource_error(resources[i]), "DescribeConfigs");
      size_t entries = 0;
      const rd_kafka_ConfigEntry_t** config =
          status.ok() ? rd_kafka_ConfigResource_configs(resources[i], &entries) : nullptr;
      for (size_t e = 0; e < entries; ++e) {
        const std::string_view name = rd_kafka_ConfigEntry_name(config[e]);
        const char* value = rd_kafka_ConfigEntry_value(config[e]);
        if (value == nullptr) continue;
        int64_t number = 0;
        if (name == "cleanup.policy") {
          settings->cleanup_policy = value;
        } else if (name == "min.insync.replicas" && absl::SimpleAtoi(value, &number)) {
          settings->min_insync_replicas = static_cast<int32_t>(number);
        } else if (name == "retention.ms" && absl::SimpleAtoi(value, &number)) {
          settings->retention_ms = number;
        }
      }
    }
    rd_kafka_event_destroy(event);
  }
  rd_kafka_ConfigResource_destroy(resource);
  return status;
}

}  // namespace

absl::Status CreateTopic(rd_kafka_t* rk, const KafkaEventLogOptions& options) {
  ASSIGN_OR_RETURN(rd_kafka_NewTopic_t * topic, NewTopic(options));
  const AdminRequest request(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS, options.request_timeout);
  rd_kafka_CreateTopics(rk, &topic, 1, request.options(), request.queue());
  rd_kafka_event_t* event = request.Wait();
  absl::Status status = absl::DeadlineExceededError("the broker did not answer CreateTopics");
  if (event != nullptr) {
    rd_kafka_resp_err_t err = rd_kafka_event_error(event);
    std::string reason =
        err == RD_KAFKA_RESP_ERR_NO_ERROR ? "" : rd_kafka_event_error_string(event);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const rd_kafka_CreateTopics_result_t* result = rd_kafka_event_CreateTopics_result(event);
      size_t count = 0;
      const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(result, &count);
      if (count == 1) {
        err = rd_kafka_topic_result_error(topics[0]);
        if (const char* s = rd_kafka_topic_result_error_string(topics[0])) reason = s;
      }
    }
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      status = absl::OkStatus();
    } else {
      status = FromKafka(err, reason.empty() ? "CreateTopics" : "CreateTopics: " + reason);
    }
    rd_kafka_event_destroy(event);
  }
  rd_kafka_NewTopic_destroy(topic);
  return status;
}

absl::StatusOr<TopicMetadata> ReadTopicMetadata(rd_kafka_t* rk, const KafkaEventLogOptions& options,
                                                absl::Duration timeout) {
  rd_kafka_topic_t* topic = rd_kafka_topic_new(rk, options.topic.c_str(), nullptr);
  const rd_kafka_metadata_t* metadata = nullptr;
  const rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, topic, &metadata, TimeoutMs(timeout));
  rd_kafka_topic_destroy(topic);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(
        fmt::format("no Kafka broker of {} answered: {}", options.brokers, rd_kafka_err2str(err)));
  }
  TopicMetadata topic_metadata;
  rd_kafka_resp_err_t topic_err = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
  for (int i = 0; i < metadata->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& topic_entry = metadata->topics[i];
    if (options.topic != topic_entry.topic) continue;
    topic_err = topic_entry.err;
    topic_metadata.partitions = topic_entry.partition_cnt;
    for (int p = 0; p < topic_entry.partition_cnt; ++p) {
      const auto replicas = static_cast<int16_t>(topic_entry.partitions[p].replica_cnt);
      if (p == 0 || replicas < topic_metadata.fewest_replicas) {
        topic_metadata.fewest_replicas = replicas;
      }
    }
  }
  rd_kafka_metadata_destroy(metadata);
  RETURN_IF_ERROR(
      FromKafka(topic_err, fmt::format("topic {} on {}", options.topic, options.brokers)));
  if (topic_metadata.partitions <= 0) {
    return absl::NotFoundError(
        fmt::format("topic {} on {} has no partitions", options.topic, options.brokers));
  }
  return topic_metadata;
}

void WarnAboutWeakerTopicSettings(rd_kafka_t* rk, const KafkaEventLogOptions& options,
                                  const TopicMetadata& metadata) {
  if (!options.replication_factor && !options.min_insync_replicas && !options.retention_ms) {
    return;
  }
  KafkaTopicSettings found;
  found.replication_factor = metadata.fewest_replicas;
  if (absl::Status read = ReadTopicConfig(rk, options, &found); !read.ok()) {
    spdlog::info(
        "cannot read the configuration of topic {} on {} ({}); only its replication "
        "factor is checked",
        options.topic, options.brokers, std::string(read.message()));
  }
  for (const std::string& warning : WeakerTopicSettings(options, found)) {
    spdlog::warn("{}", warning);
  }
}

}  // namespace switchyard::storage_internal
