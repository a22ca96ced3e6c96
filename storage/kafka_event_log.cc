#include "storage/kafka_event_log.h"

#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"

namespace switchyard {
namespace {

int TimeoutMs(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

absl::Status FromKafka(rd_kafka_resp_err_t err, std::string_view what) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return absl::OkStatus();
  const std::string message = absl::StrCat(std::string(what), ": ", rd_kafka_err2str(err));
  switch (err) {
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
      return absl::NotFoundError(message);
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
    case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
      return absl::DataLossError(message);
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
      return absl::InvalidArgumentError(message);
    default:
      return absl::UnavailableError(message);
  }
}

void LogToSpdlog(const rd_kafka_t*, int level, const char* facility, const char* message) {
  if (level <= 3) {
    spdlog::error("kafka {}: {}", facility, message);
  } else if (level <= 4) {
    spdlog::warn("kafka {}: {}", facility, message);
  } else {
    spdlog::debug("kafka {}: {}", facility, message);
  }
}

// librdkafka configuration built from key/value pairs; owns the conf until handed to a
// client.
class KafkaConfig {
 public:
  KafkaConfig() : conf_(rd_kafka_conf_new()) { rd_kafka_conf_set_log_cb(conf_, LogToSpdlog); }
  ~KafkaConfig() {
    if (conf_ != nullptr) rd_kafka_conf_destroy(conf_);
  }
  absl::Status Set(const std::string& key, const std::string& value) {
    char error[512];
    if (rd_kafka_conf_set(conf_, key.c_str(), value.c_str(), error, sizeof(error)) !=
        RD_KAFKA_CONF_OK) {
      return absl::InvalidArgumentError(absl::StrCat("kafka property ", key, ": ", error));
    }
    return absl::OkStatus();
  }
  rd_kafka_conf_t* get() { return conf_; }
  // Creates the client; the client owns the configuration afterwards.
  absl::StatusOr<rd_kafka_t*> NewClient(rd_kafka_type_t type) {
    char error[512];
    rd_kafka_t* rk = rd_kafka_new(type, conf_, error, sizeof(error));
    if (rk == nullptr) return absl::InvalidArgumentError(absl::StrCat("kafka client: ", error));
    conf_ = nullptr;
    return rk;
  }

 private:
  rd_kafka_conf_t* conf_;
};

// Counts one Append's outstanding deliveries. Delivery reports arrive on whichever thread
// polls the producer.
struct DeliveryTracker {
  absl::Mutex mu;
  size_t pending ABSL_GUARDED_BY(mu) = 0;
  rd_kafka_resp_err_t first_error ABSL_GUARDED_BY(mu) = RD_KAFKA_RESP_ERR_NO_ERROR;
};

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* message, void*) {
  auto* tracker = static_cast<DeliveryTracker*>(message->_private);
  if (tracker == nullptr) return;
  absl::MutexLock lock(&tracker->mu);
  if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR &&
      tracker->first_error == RD_KAFKA_RESP_ERR_NO_ERROR) {
    tracker->first_error = message->err;
  }
  --tracker->pending;
}

absl::Status CreateTopic(rd_kafka_t* rk, const KafkaEventLogOptions& options) {
  char error[512];
  rd_kafka_NewTopic_t* topic = rd_kafka_NewTopic_new(
      options.topic.c_str(), options.partitions, options.replication_factor, error, sizeof(error));
  if (topic == nullptr) return absl::InvalidArgumentError(absl::StrCat("new topic: ", error));
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* admin = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(admin, TimeoutMs(options.request_timeout), error,
                                            sizeof(error));
  rd_kafka_CreateTopics(rk, &topic, 1, admin, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, TimeoutMs(options.request_timeout) + 1000);
  absl::Status status = absl::DeadlineExceededError("creating the topic timed out");
  if (event != nullptr) {
    rd_kafka_resp_err_t err = rd_kafka_event_error(event);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const rd_kafka_CreateTopics_result_t* result = rd_kafka_event_CreateTopics_result(event);
      size_t count = 0;
      const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(result, &count);
      if (count == 1) err = rd_kafka_topic_result_error(topics[0]);
    }
    status = err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS ? absl::OkStatus()
                                                           : FromKafka(err, "creating the topic");
    rd_kafka_event_destroy(event);
  }
  rd_kafka_AdminOptions_destroy(admin);
  rd_kafka_queue_destroy(queue);
  rd_kafka_NewTopic_destroy(topic);
  return status;
}

absl::StatusOr<int32_t> TopicPartitionCount(rd_kafka_t* rk, const KafkaEventLogOptions& options) {
  rd_kafka_topic_t* topic = rd_kafka_topic_new(rk, options.topic.c_str(), nullptr);
  const rd_kafka_metadata_t* metadata = nullptr;
  rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk, 0, topic, &metadata, TimeoutMs(options.request_timeout));
  rd_kafka_topic_destroy(topic);
  RETURN_IF_ERROR(FromKafka(err, absl::StrCat("reading metadata from ", options.brokers)));
  int32_t partitions = 0;
  rd_kafka_resp_err_t topic_err = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
  for (int i = 0; i < metadata->topic_cnt; ++i) {
    if (options.topic == metadata->topics[i].topic) {
      topic_err = metadata->topics[i].err;
      partitions = metadata->topics[i].partition_cnt;
    }
  }
  rd_kafka_metadata_destroy(metadata);
  RETURN_IF_ERROR(
      FromKafka(topic_err, absl::StrCat("topic ", options.topic, " on ", options.brokers)));
  if (partitions <= 0) {
    return absl::NotFoundError(absl::StrCat("topic ", options.topic, " has no partitions"));
  }
  return partitions;
}

}  // namespace

class KafkaEventLog::Reader final : public EventLogReader {
 public:
  Reader(rd_kafka_t* consumer, std::string topic, int32_t partitions, absl::Duration timeout)
      : consumer_(consumer),
        topic_(std::move(topic)),
        offsets_(static_cast<size_t>(partitions), 0),
        paused_(static_cast<size_t>(partitions), false),
        timeout_(timeout) {}
  ~Reader() override {
    rd_kafka_consumer_close(consumer_);
    rd_kafka_destroy(consumer_);
  }

  int32_t partition_count() const override { return static_cast<int32_t>(offsets_.size()); }

  absl::Status Seek(int32_t partition, int64_t offset) override {
    if (partition < 0 || partition >= partition_count()) {
      return absl::InvalidArgumentError(absl::StrCat("no partition ", partition, " in ", topic_));
    }
    offsets_[partition] = offset;
    assigned_ = false;
    return absl::OkStatus();
  }

  void Pause(int32_t partition, bool paused) override {
    if (paused_[partition] == paused) return;
    paused_[partition] = paused;
    if (!assigned_) return;  // applied at the next assignment
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, topic_.c_str(), partition);
    (void)(paused ? rd_kafka_pause_partitions(consumer_, list)
                  : rd_kafka_resume_partitions(consumer_, list));
    rd_kafka_topic_partition_list_destroy(list);
  }

  absl::StatusOr<size_t> Poll(size_t max_records, absl::Duration timeout,
                              absl::FunctionRef<void(const LogRecordView&)> on_record) override {
    if (!assigned_) RETURN_IF_ERROR(Assign());
    size_t delivered = 0;
    int wait_ms = TimeoutMs(timeout);
    while (delivered < max_records) {
      rd_kafka_message_t* message = rd_kafka_consumer_poll(consumer_, wait_ms);
      if (message == nullptr) break;
      wait_ms = 0;
      if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        const rd_kafka_resp_err_t err = message->err;
        rd_kafka_message_destroy(message);
        if (err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
        return FromKafka(err, absl::StrCat("reading ", topic_));
      }
      const int32_t partition = message->partition;
      if (partition >= 0 && partition < partition_count()) {
        offsets_[partition] = message->offset + 1;
        on_record(LogRecordView{
            partition, message->offset,
            std::string_view(static_cast<const char*>(message->payload), message->len)});
        ++delivered;
      }
      rd_kafka_message_destroy(message);
    }
    return delivered;
  }

  absl::StatusOr<int64_t> EndOffset(int32_t partition) override {
    int64_t low = 0;
    int64_t high = 0;
    RETURN_IF_ERROR(FromKafka(rd_kafka_query_watermark_offsets(consumer_, topic_.c_str(), partition,
                                                               &low, &high, TimeoutMs(timeout_)),
                              absl::StrCat("reading the end of ", topic_)));
    return high;
  }

 private:
  absl::Status Assign() {
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partition_count());
    for (int32_t p = 0; p < partition_count(); ++p) {
      rd_kafka_topic_partition_list_add(list, topic_.c_str(), p)->offset = offsets_[p];
    }
    absl::Status status = FromKafka(rd_kafka_assign(consumer_, list), "assigning partitions");
    rd_kafka_topic_partition_list_destroy(list);
    RETURN_IF_ERROR(status);
    assigned_ = true;
    for (int32_t p = 0; p < partition_count(); ++p) {
      if (paused_[p]) {
        paused_[p] = false;
        Pause(p, true);
      }
    }
    return absl::OkStatus();
  }

  rd_kafka_t* consumer_;
  const std::string topic_;
  std::vector<int64_t> offsets_;  // the next offset to read per partition
  std::vector<bool> paused_;
  const absl::Duration timeout_;
  bool assigned_ = false;
};

KafkaEventLog::KafkaEventLog(KafkaEventLogOptions options, rd_kafka_t* producer, int32_t partitions)
    : options_(std::move(options)), producer_(producer), partition_count_(partitions) {}

KafkaEventLog::~KafkaEventLog() {
  rd_kafka_flush(producer_, TimeoutMs(options_.delivery_timeout));
  rd_kafka_destroy(producer_);
}

absl::StatusOr<std::unique_ptr<KafkaEventLog>> KafkaEventLog::Open(
    const KafkaEventLogOptions& options) {
  KafkaConfig config;
  RETURN_IF_ERROR(config.Set("bootstrap.servers", options.brokers));
  RETURN_IF_ERROR(config.Set("enable.idempotence", "true"));
  RETURN_IF_ERROR(config.Set("acks", "all"));
  RETURN_IF_ERROR(config.Set("linger.ms", "2"));
  RETURN_IF_ERROR(
      config.Set("message.timeout.ms", std::to_string(TimeoutMs(options.delivery_timeout))));
  for (const auto& [key, value] : options.properties) RETURN_IF_ERROR(config.Set(key, value));
  rd_kafka_conf_set_dr_msg_cb(config.get(), OnDelivery);
  ASSIGN_OR_RETURN(rd_kafka_t * producer, config.NewClient(RD_KAFKA_PRODUCER));

  absl::StatusOr<int32_t> partitions = TopicPartitionCount(producer, options);
  if (absl::IsNotFound(partitions.status())) {
    const absl::Status created = CreateTopic(producer, options);
    if (!created.ok()) {
      spdlog::warn("could not create topic {} on {}: {}", options.topic, options.brokers,
                   std::string(created.message()));
    }
    partitions = TopicPartitionCount(producer, options);
  }
  if (!partitions.ok()) {
    rd_kafka_destroy(producer);
    return partitions.status();
  }
  return std::unique_ptr<KafkaEventLog>(new KafkaEventLog(options, producer, *partitions));
}

absl::Status KafkaEventLog::Append(std::span<const OutgoingRecord> records) {
  DeliveryTracker tracker;
  {
    absl::MutexLock lock(&tracker.mu);
    tracker.pending = records.size();
  }
  size_t produced = 0;
  absl::Status status;
  for (const OutgoingRecord& r : records) {
    for (;;) {
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          producer_, RD_KAFKA_V_TOPIC(options_.topic.c_str()),
          RD_KAFKA_V_PARTITION(r.partition.value_or(RD_KAFKA_PARTITION_UA)),
          RD_KAFKA_V_KEY(r.key.data(), r.key.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(r.payload.data()), r.payload.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&tracker), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(producer_, 10);  // the local queue drains as deliveries complete
        continue;
      }
      status = FromKafka(err, absl::StrCat("producing to ", options_.topic));
      break;
    }
    if (!status.ok()) break;
    ++produced;
  }
  {
    // Records never handed to librdkafka will not be reported.
    absl::MutexLock lock(&tracker.mu);
    tracker.pending -= records.size() - produced;
  }
  const absl::Time deadline = absl::Now() + options_.delivery_timeout + absl::Seconds(5);
  for (;;) {
    {
      absl::MutexLock lock(&tracker.mu);
      if (tracker.pending == 0) {
        if (status.ok()) {
          status = FromKafka(tracker.first_error, absl::StrCat("delivering to ", options_.topic));
        }
        return status;
      }
    }
    if (absl::Now() > deadline) {
      // The tracker must outlive every report that refers to it: purge and drain them.
      rd_kafka_purge(producer_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
      rd_kafka_flush(producer_, 1000);
      return absl::DeadlineExceededError("delivery reports did not arrive in time");
    }
    rd_kafka_poll(producer_, 20);
  }
}

absl::StatusOr<std::unique_ptr<EventLogReader>> KafkaEventLog::OpenReader() {
  KafkaConfig config;
  RETURN_IF_ERROR(config.Set("bootstrap.servers", options_.brokers));
  std::random_device random;
  RETURN_IF_ERROR(config.Set("group.id", absl::StrCat("switchyard-fold-", random())));
  RETURN_IF_ERROR(config.Set("enable.auto.commit", "false"));
  RETURN_IF_ERROR(config.Set("enable.auto.offset.store", "false"));
  // A stored position the log no longer has must stop the fold, not skip data.
  RETURN_IF_ERROR(config.Set("auto.offset.reset", "error"));
  for (const auto& [key, value] : options_.properties) RETURN_IF_ERROR(config.Set(key, value));
  ASSIGN_OR_RETURN(rd_kafka_t * consumer, config.NewClient(RD_KAFKA_CONSUMER));
  rd_kafka_poll_set_consumer(consumer);
  return std::unique_ptr<EventLogReader>(
      new Reader(consumer, options_.topic, partition_count_, options_.request_timeout));
}

}  // namespace switchyard
