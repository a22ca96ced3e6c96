#include "storage/kafka_event_log.h"

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"

namespace switchyard {
namespace {

int TimeoutMs(absl::Duration d) { return static_cast<int>(absl::ToInt64Milliseconds(d)); }

absl::Status FromKafka(rd_kafka_resp_err_t err, std::string_view what) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return absl::OkStatus();
  const std::string message = fmt::format("{}: {}", what, rd_kafka_err2str(err));
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
    case RD_KAFKA_RESP_ERR__FATAL:
      return absl::FailedPreconditionError(message);
    default:
      return absl::UnavailableError(message);
  }
}

// Consumer errors that librdkafka recovers from on its own: it reconnects, refreshes the
// metadata and fetches again from the same position.
bool ConsumerRecoversFrom(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
      return true;
    default:
      return false;
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

// At most one warning per interval for one kind of recurring trouble; the rest are counted
// and reported with the next warning.
class WarningThrottle {
 public:
  void Warn(const std::string& message) {
    int suppressed = 0;
    {
      absl::MutexLock lock(&mu_);
      const absl::Time now = absl::Now();
      if (now - last_ < absl::Seconds(5)) {
        ++suppressed_;
        return;
      }
      last_ = now;
      suppressed = suppressed_;
      suppressed_ = 0;
    }
    if (suppressed > 0) {
      spdlog::warn("{} ({} similar messages suppressed)", message, suppressed);
    } else {
      spdlog::warn("{}", message);
    }
  }

 private:
  absl::Mutex mu_;
  absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

KafkaLogMetrics::KafkaLogMetrics(MetricsRegistry& r)
    : records_produced(r.AddCounter("switchyard_kafka_records_produced_total",
                                    "Records the Kafka log acknowledged as written")),
      delivery_failures(r.AddCounter("switchyard_kafka_delivery_failures_total",
                                     "Records whose delivery report was an error")),
      client_errors(r.AddCounter("switchyard_kafka_client_errors_total",
                                 "Errors librdkafka reported (unreachable brokers and the like)")),
      consumer_transient_errors(
          r.AddCounter("switchyard_kafka_consumer_transient_errors_total",
                       "Read errors librdkafka recovers from by itself (not returned)")),
      append_seconds(r.AddHistogram("switchyard_kafka_append_seconds",
                                    "Time for one Append, until every record is acknowledged",
                                    LatencyBucketsSeconds())) {}

// What a librdkafka client's callbacks need: the metrics and the warning throttle. Outlives
// the client it belongs to.
struct KafkaClientContext {
  KafkaClientContext(std::string who, KafkaLogMetrics* m) : role(std::move(who)), metrics(m) {}
  const std::string role;  // "producer" or "reader", for the messages
  KafkaLogMetrics* const metrics;
  WarningThrottle throttle;
};

namespace {

void OnClientError(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
  auto* context = static_cast<KafkaClientContext*>(opaque);
  if (context == nullptr) return;
  if (context->metrics != nullptr) context->metrics->client_errors.Increment();
  const auto code = static_cast<rd_kafka_resp_err_t>(err);
  if (code == RD_KAFKA_RESP_ERR__FATAL) {
    char fatal[512];
    const rd_kafka_resp_err_t original = rd_kafka_fatal_error(rk, fatal, sizeof(fatal));
    spdlog::error("kafka {}: fatal error {}: {}; the client cannot continue", context->role,
                  rd_kafka_err2name(original), fatal);
    return;
  }
  context->throttle.Warn(
      fmt::format("kafka {}: {} ({}); retrying", context->role, reason, rd_kafka_err2name(code)));
}

// librdkafka configuration built from key/value pairs; owns the conf until handed to a
// client.
class KafkaConfig {
 public:
  explicit KafkaConfig(void* context) : conf_(rd_kafka_conf_new()) {
    rd_kafka_conf_set_log_cb(conf_, LogToSpdlog);
    rd_kafka_conf_set_error_cb(conf_, OnClientError);
    rd_kafka_conf_set_opaque(conf_, context);
  }
  ~KafkaConfig() {
    if (conf_ != nullptr) rd_kafka_conf_destroy(conf_);
  }
  KafkaConfig(const KafkaConfig&) = delete;
  KafkaConfig& operator=(const KafkaConfig&) = delete;

  absl::Status Set(const std::string& key, const std::string& value) {
    char error[512];
    if (rd_kafka_conf_set(conf_, key.c_str(), value.c_str(), error, sizeof(error)) !=
        RD_KAFKA_CONF_OK) {
      return absl::InvalidArgumentError(fmt::format("kafka property {}: {}", key, error));
    }
    return absl::OkStatus();
  }
  rd_kafka_conf_t* get() { return conf_; }
  // Creates the client; the client owns the configuration afterwards.
  absl::StatusOr<rd_kafka_t*> NewClient(rd_kafka_type_t type) {
    char error[512];
    rd_kafka_t* rk = rd_kafka_new(type, conf_, error, sizeof(error));
    if (rk == nullptr) return absl::InvalidArgumentError(fmt::format("kafka client: {}", error));
    conf_ = nullptr;
    return rk;
  }

 private:
  rd_kafka_conf_t* conf_;
};

// One Append's outstanding deliveries. Each produced record holds a reference, released by
// its delivery report, so a report that arrives after Append gave up touches live memory.
struct DeliveryTracker {
  absl::Mutex mu;
  size_t pending ABSL_GUARDED_BY(mu) = 0;
  size_t failed ABSL_GUARDED_BY(mu) = 0;
  rd_kafka_resp_err_t first_error ABSL_GUARDED_BY(mu) = RD_KAFKA_RESP_ERR_NO_ERROR;
};

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* message, void*) {
  auto* ref = static_cast<std::shared_ptr<DeliveryTracker>*>(message->_private);
  if (ref == nullptr) return;
  {
    DeliveryTracker& tracker = **ref;
    absl::MutexLock lock(&tracker.mu);
    if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++tracker.failed;
      if (tracker.first_error == RD_KAFKA_RESP_ERR_NO_ERROR) tracker.first_error = message->err;
    }
    --tracker.pending;
  }
  delete ref;
}

absl::Status CreateTopic(rd_kafka_t* rk, const KafkaEventLogOptions& options) {
  char error[512];
  rd_kafka_NewTopic_t* topic = rd_kafka_NewTopic_new(
      options.topic.c_str(), options.partitions, options.replication_factor, error, sizeof(error));
  if (topic == nullptr) return absl::InvalidArgumentError(fmt::format("new topic: {}", error));
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* admin = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(admin, TimeoutMs(options.request_timeout), error,
                                            sizeof(error));
  rd_kafka_CreateTopics(rk, &topic, 1, admin, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, TimeoutMs(options.request_timeout) + 1000);
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
  rd_kafka_AdminOptions_destroy(admin);
  rd_kafka_queue_destroy(queue);
  rd_kafka_NewTopic_destroy(topic);
  return status;
}

// The topic's partition count from the cluster's metadata. NotFound when the topic does not
// exist; Unavailable (or DeadlineExceeded) when no broker answered.
absl::StatusOr<int32_t> TopicPartitionCount(rd_kafka_t* rk, const KafkaEventLogOptions& options,
                                            absl::Duration timeout) {
  rd_kafka_topic_t* topic = rd_kafka_topic_new(rk, options.topic.c_str(), nullptr);
  const rd_kafka_metadata_t* metadata = nullptr;
  const rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, topic, &metadata, TimeoutMs(timeout));
  rd_kafka_topic_destroy(topic);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return absl::UnavailableError(
        fmt::format("no Kafka broker of {} answered: {}", options.brokers, rd_kafka_err2str(err)));
  }
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
      FromKafka(topic_err, fmt::format("topic {} on {}", options.topic, options.brokers)));
  if (partitions <= 0) {
    return absl::NotFoundError(
        fmt::format("topic {} on {} has no partitions", options.topic, options.brokers));
  }
  return partitions;
}

}  // namespace

class KafkaEventLog::Reader final : public EventLogReader {
 public:
  Reader(std::unique_ptr<KafkaClientContext> context, rd_kafka_t* consumer, std::string topic,
         int32_t partitions, absl::Duration timeout)
      : context_(std::move(context)),
        consumer_(consumer),
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
      return absl::InvalidArgumentError(fmt::format("no partition {} in {}", partition, topic_));
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
        const std::string detail = rd_kafka_message_errstr(message);
        rd_kafka_message_destroy(message);
        if (err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;
        if (ConsumerRecoversFrom(err)) {
          if (context_->metrics != nullptr) {
            context_->metrics->consumer_transient_errors.Increment();
          }
          context_->throttle.Warn(
              fmt::format("kafka reader of {}: {}; librdkafka retries", topic_, detail));
          continue;
        }
        return FromKafka(err, fmt::format("reading {}: {}", topic_, detail));
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
                              fmt::format("reading the end of {}", topic_)));
    return high;
  }

  bool AtEnd() override {
    if (!assigned_) return true;
    for (int32_t p = 0; p < partition_count(); ++p) {
      if (paused_[p]) continue;
      int64_t low = RD_KAFKA_OFFSET_INVALID;
      int64_t high = RD_KAFKA_OFFSET_INVALID;
      // The watermarks of the last fetch answer: no request.
      if (rd_kafka_get_watermark_offsets(consumer_, topic_.c_str(), p, &low, &high) ==
              RD_KAFKA_RESP_ERR_NO_ERROR &&
          high >= 0 && offsets_[p] < high) {
        return false;
      }
    }
    return true;
  }

  absl::StatusOr<int64_t> StartOffset(int32_t partition) override {
    int64_t low = 0;
    int64_t high = 0;
    RETURN_IF_ERROR(FromKafka(rd_kafka_query_watermark_offsets(consumer_, topic_.c_str(), partition,
                                                               &low, &high, TimeoutMs(timeout_)),
                              fmt::format("reading the start of {}", topic_)));
    return low;
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

  std::unique_ptr<KafkaClientContext> context_;  // outlives consumer_
  rd_kafka_t* consumer_;
  const std::string topic_;
  std::vector<int64_t> offsets_;  // the next offset to read per partition
  std::vector<bool> paused_;
  const absl::Duration timeout_;
  bool assigned_ = false;
};

KafkaEventLog::KafkaEventLog(KafkaEventLogOptions options,
                             std::unique_ptr<KafkaClientContext> context, rd_kafka_t* producer,
                             int32_t partitions)
    : options_(std::move(options)),
      context_(std::move(context)),
      producer_(producer),
      partition_count_(partitions) {}

KafkaEventLog::~KafkaEventLog() {
  rd_kafka_flush(producer_, TimeoutMs(options_.delivery_timeout));
  rd_kafka_destroy(producer_);
}

absl::StatusOr<std::unique_ptr<KafkaEventLog>> KafkaEventLog::Open(
    const KafkaEventLogOptions& options) {
  if (options.partitions <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("kafka partitions must be positive, not {}", options.partitions));
  }
  auto context = std::make_unique<KafkaClientContext>("producer", options.metrics);
  KafkaConfig config(context.get());
  RETURN_IF_ERROR(config.Set("bootstrap.servers", options.brokers));
  RETURN_IF_ERROR(config.Set("enable.idempotence", "true"));
  RETURN_IF_ERROR(config.Set("acks", "all"));
  // Append waits for its records: a linger would only delay each slot's seal. Without Nagle's
  // algorithm, small requests are not held back behind delayed ACKs (bench/kafka_log_bench.cc).
  RETURN_IF_ERROR(config.Set("linger.ms", "0"));
  RETURN_IF_ERROR(config.Set("socket.nagle.disable", "true"));
  // A missing topic is created below with the configured partition count, never by the
  // broker with its own default.
  RETURN_IF_ERROR(config.Set("allow.auto.create.topics", "false"));
  RETURN_IF_ERROR(
      config.Set("message.timeout.ms", std::to_string(TimeoutMs(options.delivery_timeout))));
  for (const auto& [key, value] : options.properties) RETURN_IF_ERROR(config.Set(key, value));
  rd_kafka_conf_set_dr_msg_cb(config.get(), OnDelivery);
  ASSIGN_OR_RETURN(rd_kafka_t * producer, config.NewClient(RD_KAFKA_PRODUCER));
  auto fail = [producer](absl::Status status) {
    rd_kafka_destroy(producer);
    return status;
  };

  absl::StatusOr<int32_t> partitions =
      TopicPartitionCount(producer, options, options.request_timeout);
  if (absl::IsNotFound(partitions.status())) {
    if (absl::Status created = CreateTopic(producer, options); !created.ok()) {
      return fail(absl::NotFoundError(fmt::format(
          "topic {} does not exist on {} and could not be created with {} partitions: {}",
          options.topic, options.brokers, options.partitions, std::string(created.message()))));
    }
    spdlog::info("created topic {} on {} with {} partitions", options.topic, options.brokers,
                 options.partitions);
    // Creation propagates to every broker asynchronously.
    const absl::Time deadline = absl::Now() + options.request_timeout;
    do {
      partitions = TopicPartitionCount(producer, options, options.request_timeout);
      if (partitions.ok() || absl::Now() > deadline) break;
      absl::SleepFor(absl::Milliseconds(100));
    } while (absl::IsNotFound(partitions.status()) || absl::IsUnavailable(partitions.status()));
  }
  if (!partitions.ok()) return fail(partitions.status());
  if (*partitions != options.partitions) {
    spdlog::info("topic {} on {} has {} partitions (kafka_partitions = {} applies to new topics)",
                 options.topic, options.brokers, *partitions, options.partitions);
  }
  return std::unique_ptr<KafkaEventLog>(
      new KafkaEventLog(options, std::move(context), producer, *partitions));
}

absl::Status KafkaEventLog::Append(std::span<const OutgoingRecord> records) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.delivery_timeout + absl::Seconds(5);
  auto tracker = std::make_shared<DeliveryTracker>();
  // Waits for every record produced so far; returns the first delivery error.
  auto await_deliveries = [&]() -> absl::Status {
    for (;;) {
      {
        absl::MutexLock lock(&tracker->mu);
        if (tracker->pending == 0) {
          return FromKafka(tracker->first_error, fmt::format("delivering to {}", options_.topic));
        }
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            fmt::format("delivery reports from {} did not arrive in time", options_.brokers));
      }
      rd_kafka_poll(producer_, 20);
    }
  };

  absl::Status status;
  bool keyed_unacknowledged = false;
  for (const OutgoingRecord& r : records) {
    if (r.partition.has_value() && keyed_unacknowledged) {
      // A broadcast record (a watermark or a stream marker) waits for the events before it.
      status = await_deliveries();
      if (!status.ok()) break;
      keyed_unacknowledged = false;
    }
    auto* ref = new std::shared_ptr<DeliveryTracker>(tracker);
    {
      absl::MutexLock lock(&tracker->mu);
      ++tracker->pending;
    }
    rd_kafka_resp_err_t err;
    for (;;) {
      err = rd_kafka_producev(
          producer_, RD_KAFKA_V_TOPIC(options_.topic.c_str()),
          RD_KAFKA_V_PARTITION(r.partition.value_or(RD_KAFKA_PARTITION_UA)),
          RD_KAFKA_V_KEY(r.key.data(), r.key.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(r.payload.data()), r.payload.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(ref), RD_KAFKA_V_END);
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || absl::Now() > deadline) break;
      rd_kafka_poll(producer_, 10);  // the local queue drains as deliveries complete
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      // Never handed to librdkafka: no report will come for it.
      delete ref;
      {
        absl::MutexLock lock(&tracker->mu);
        --tracker->pending;
      }
      status = FromKafka(err, fmt::format("producing to {}", options_.topic));
      break;
    }
    if (!r.partition.has_value()) keyed_unacknowledged = true;
  }
  const absl::Status delivered = await_deliveries();
  if (status.ok()) status = delivered;
  size_t failed = 0;
  {
    absl::MutexLock lock(&tracker->mu);
    failed = tracker->failed;
  }
  if (KafkaLogMetrics* metrics = options_.metrics) {
    metrics->append_seconds.Observe(absl::ToDoubleSeconds(absl::Now() - start));
    if (status.ok()) metrics->records_produced.Increment(records.size());
    metrics->delivery_failures.Increment(failed);
  }
  return status;
}

absl::StatusOr<std::unique_ptr<EventLogReader>> KafkaEventLog::OpenReader() {
  auto context = std::make_unique<KafkaClientContext>("reader", options_.metrics);
  KafkaConfig config(context.get());
  RETURN_IF_ERROR(config.Set("bootstrap.servers", options_.brokers));
  std::random_device random;
  RETURN_IF_ERROR(config.Set("group.id", fmt::format("switchyard-fold-{}", random())));
  RETURN_IF_ERROR(config.Set("enable.auto.commit", "false"));
  RETURN_IF_ERROR(config.Set("enable.auto.offset.store", "false"));
  RETURN_IF_ERROR(config.Set("allow.auto.create.topics", "false"));
  RETURN_IF_ERROR(config.Set("socket.nagle.disable", "true"));
  // A stored position the log no longer has must stop the fold, not skip data.
  RETURN_IF_ERROR(config.Set("auto.offset.reset", "error"));
  for (const auto& [key, value] : options_.properties) RETURN_IF_ERROR(config.Set(key, value));
  ASSIGN_OR_RETURN(rd_kafka_t * consumer, config.NewClient(RD_KAFKA_CONSUMER));
  rd_kafka_poll_set_consumer(consumer);
  return std::unique_ptr<EventLogReader>(new Reader(std::move(context), consumer, options_.topic,
                                                    partition_count_, options_.request_timeout));
}

}  // namespace switchyard
