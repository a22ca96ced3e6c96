#include "storage/kafka_event_log.h"

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"
#include "storage/internal/kafka_client.h"
#include "storage/internal/kafka_topic_admin.h"
#include "storage/internal/kafka_topic_settings.h"

namespace switchyard {
namespace {

using storage_internal::CreateTopic;
using storage_internal::FromKafka;
using storage_internal::ReadTopicMetadata;
using storage_internal::TimeoutMs;
using storage_internal::TopicMetadata;
using storage_internal::WarnAboutWeakerTopicSettings;

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
                                    LatencyBucketsSeconds())),
      producer_recreations(
          r.AddCounter("switchyard_kafka_producer_recreated_total",
                       "Producers replaced after a fatal error (the idempotent producer lost "
                       "its sequence), their unacknowledged records checked in the topic")) {}

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
    spdlog::error("kafka {}: fatal error {}: {}; {}", context->role, rd_kafka_err2name(original),
                  fatal,
                  context->role == "producer" ? "the log replaces the producer"
                                              : "the client cannot continue");
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

// What became of one record handed to librdkafka, from its delivery report.
struct RecordDelivery {
  bool produced = false;  // handed to librdkafka, so a report will come
  bool reported = false;
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  // For a failed record: whether it may be in the partition all the same.
  rd_kafka_msg_status_t status = RD_KAFKA_MSG_STATUS_NOT_PERSISTED;
  int32_t partition = RD_KAFKA_PARTITION_UA;
  int64_t offset = RD_KAFKA_OFFSET_INVALID;
};

// One pass's outstanding deliveries, by the record's index in the Append. Each produced record
// holds a reference, released by its delivery report, so a report that arrives after Append
// gave up touches live memory.
struct DeliveryTracker {
  explicit DeliveryTracker(size_t records) : deliveries(records) {}
  absl::Mutex mu;
  size_t pending ABSL_GUARDED_BY(mu) = 0;
  rd_kafka_resp_err_t first_error ABSL_GUARDED_BY(mu) = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::vector<RecordDelivery> deliveries ABSL_GUARDED_BY(mu);
};

struct DeliveryRef {
  std::shared_ptr<DeliveryTracker> tracker;
  size_t index;
};

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* message, void*) {
  auto* ref = static_cast<DeliveryRef*>(message->_private);
  if (ref == nullptr) return;
  {
    DeliveryTracker& tracker = *ref->tracker;
    absl::MutexLock lock(&tracker.mu);
    RecordDelivery& delivery = tracker.deliveries[ref->index];
    delivery.reported = true;
    delivery.err = message->err;
    delivery.status = rd_kafka_message_status(message);
    delivery.partition = message->partition;
    delivery.offset = message->offset;
    if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR &&
        tracker.first_error == RD_KAFKA_RESP_ERR_NO_ERROR) {
      tracker.first_error = message->err;
    }
    --tracker.pending;
  }
  delete ref;
}

bool HasFatalError(rd_kafka_t* producer) {
  return rd_kafka_fatal_error(producer, nullptr, 0) != RD_KAFKA_RESP_ERR_NO_ERROR;
}

absl::Status FatalErrorStatus(rd_kafka_t* producer, const std::string& topic) {
  char reason[512];
  const rd_kafka_resp_err_t err = rd_kafka_fatal_error(producer, reason, sizeof(reason));
  return absl::UnavailableError(fmt::format("the producer to {} hit a fatal error {}: {}", topic,
                                            rd_kafka_err2name(err), reason));
}

// One pass of an Append over its records not yet written.
struct ProducePass {
  absl::Status status;
  bool fatal = false;  // the producer hit a fatal error and must be replaced
  std::shared_ptr<DeliveryTracker> tracker;
};

// Produces, in order, the records not `written`, and waits for their delivery reports. A record
// with a partition (a watermark or a stream marker) is produced only once every keyed record
// before it in this pass is acknowledged. Once the producer has a fatal error, the records on
// the wire get options.request_timeout for their reports before the pass gives up on them.
ProducePass ProduceRecords(rd_kafka_t* producer, const KafkaEventLogOptions& options,
                           std::span<const OutgoingRecord> records,
                           const std::vector<bool>& written, absl::Time deadline) {
  ProducePass pass{absl::OkStatus(), false, std::make_shared<DeliveryTracker>(records.size())};
  DeliveryTracker& tracker = *pass.tracker;
  absl::Time fatal_deadline = absl::InfiniteFuture();
  // Waits for every record produced so far; returns the first delivery error.
  auto await_deliveries = [&]() -> absl::Status {
    for (;;) {
      {
        absl::MutexLock lock(&tracker.mu);
        if (tracker.pending == 0) {
          return FromKafka(tracker.first_error, fmt::format("delivering to {}", options.topic));
        }
      }
      const absl::Time now = absl::Now();
      if (HasFatalError(producer)) {
        if (fatal_deadline == absl::InfiniteFuture()) {
          fatal_deadline = now + options.request_timeout;
        }
        if (now > fatal_deadline) return FatalErrorStatus(producer, options.topic);
      }
      if (now > deadline) {
        return absl::DeadlineExceededError(
            fmt::format("delivery reports from {} did not arrive in time", options.brokers));
      }
      // Waits for the producer's outstanding records (Appends run one at a time: this pass's)
      // and serves their reports. A backfill's Appends of 10,000 records run 2 to 3 times
      // faster than with rd_kafka_poll here (bench/README.md, "The event log at scale").
      rd_kafka_flush(producer, 20);
    }
  };

  absl::Status status;
  bool keyed_unacknowledged = false;
  for (size_t i = 0; i < records.size(); ++i) {
    if (written[i]) continue;
    const OutgoingRecord& r = records[i];
    if (r.partition.has_value() && keyed_unacknowledged) {
      // A broadcast record (a watermark or a stream marker) waits for the events before it.
      status = await_deliveries();
      if (!status.ok()) break;
      keyed_unacknowledged = false;
    }
    auto* ref = new DeliveryRef{pass.tracker, i};
    {
      absl::MutexLock lock(&tracker.mu);
      ++tracker.pending;
      tracker.deliveries[i].produced = true;
    }
    rd_kafka_resp_err_t err;
    for (;;) {
      err = rd_kafka_producev(
          producer, RD_KAFKA_V_TOPIC(options.topic.c_str()),
          RD_KAFKA_V_PARTITION(r.partition.value_or(RD_KAFKA_PARTITION_UA)),
          RD_KAFKA_V_KEY(r.key.data(), r.key.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(r.payload.data()), r.payload.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(ref), RD_KAFKA_V_END);
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL || absl::Now() > deadline) break;
      rd_kafka_poll(producer, 10);  // the local queue drains as deliveries complete
    }
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      // Never handed to librdkafka: no report will come for it.
      delete ref;
      {
        absl::MutexLock lock(&tracker.mu);
        --tracker.pending;
        tracker.deliveries[i].produced = false;
      }
      status = FromKafka(err, fmt::format("producing to {}", options.topic));
      break;
    }
    if (!r.partition.has_value()) keyed_unacknowledged = true;
  }
  const absl::Status delivered = await_deliveries();
  if (status.ok()) status = delivered;
  // A fatal error after every record was acknowledged is left to the next Append.
  pass.fatal = !status.ok() && HasFatalError(producer);
  if (pass.fatal) status = FatalErrorStatus(producer, options.topic);
  pass.status = status;
  return pass;
}

// A producer with the log's settings: idempotent, acks=all, no linger.
absl::StatusOr<rd_kafka_t*> NewProducer(const KafkaEventLogOptions& options,
                                        KafkaClientContext* context) {
  KafkaConfig config(context);
  RETURN_IF_ERROR(config.Set("bootstrap.servers", options.brokers));
  RETURN_IF_ERROR(config.Set("enable.idempotence", "true"));
  RETURN_IF_ERROR(config.Set("acks", "all"));
  // Append waits for its records: a linger would only delay each slot's seal. Without Nagle's
  // algorithm, small requests are not held back behind delayed ACKs (bench/kafka_log_bench.cc).
  RETURN_IF_ERROR(config.Set("linger.ms", "0"));
  RETURN_IF_ERROR(config.Set("socket.nagle.disable", "true"));
  // A missing topic is created by Open with the configured partition count, never by the
  // broker with its own default.
  RETURN_IF_ERROR(config.Set("allow.auto.create.topics", "false"));
  RETURN_IF_ERROR(
      config.Set("message.timeout.ms", std::to_string(TimeoutMs(options.delivery_timeout))));
  for (const auto& [key, value] : options.properties) RETURN_IF_ERROR(config.Set(key, value));
  rd_kafka_conf_set_dr_msg_cb(config.get(), OnDelivery);
  return config.NewClient(RD_KAFKA_PRODUCER);
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
      partition_count_(partitions),
      partition_ends_(static_cast<size_t>(partitions)),
      producer_(producer) {}

KafkaEventLog::~KafkaEventLog() {
  rd_kafka_t* producer = this->producer();
  rd_kafka_flush(producer, TimeoutMs(options_.delivery_timeout));
  rd_kafka_destroy(producer);
}

rd_kafka_t* KafkaEventLog::producer() const {
  absl::MutexLock lock(&producer_mu_);
  return producer_;
}

rd_kafka_t* KafkaEventLog::producer_for_testing() const { return producer(); }

absl::StatusOr<std::unique_ptr<KafkaEventLog>> KafkaEventLog::Open(
    const KafkaEventLogOptions& options) {
  if (options.partitions <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("kafka partitions must be positive, not {}", options.partitions));
  }
  if (options.replication_factor.has_value() && *options.replication_factor <= 0) {
    return absl::InvalidArgumentError(fmt::format(
        "kafka replication factor must be positive, not {}", *options.replication_factor));
  }
  if (options.min_insync_replicas.has_value() && options.replication_factor.has_value() &&
      *options.min_insync_replicas > *options.replication_factor) {
    return absl::InvalidArgumentError(
        fmt::format("kafka min.insync.replicas {} exceeds the replication factor {}",
                    *options.min_insync_replicas, *options.replication_factor));
  }
  auto context = std::make_unique<KafkaClientContext>("producer", options.metrics);
  ASSIGN_OR_RETURN(rd_kafka_t * producer, NewProducer(options, context.get()));
  auto fail = [producer](absl::Status status) {
    rd_kafka_destroy(producer);
    return status;
  };

  absl::StatusOr<TopicMetadata> metadata =
      ReadTopicMetadata(producer, options, options.request_timeout);
  const bool existed = metadata.ok();
  if (absl::IsNotFound(metadata.status())) {
    if (absl::Status created = CreateTopic(producer, options); !created.ok()) {
      return fail(absl::NotFoundError(fmt::format(
          "topic {} does not exist on {} and could not be created with {} partitions: {}",
          options.topic, options.brokers, options.partitions, std::string(created.message()))));
    }
    std::string settings;
    for (const auto& [name, value] : storage_internal::NewTopicConfig(options)) {
      settings += fmt::format(", {}={}", name, value);
    }
    spdlog::info("created topic {} on {} with {} partitions, replication factor {}{}",
                 options.topic, options.brokers, options.partitions,
                 options.replication_factor.has_value()
                     ? std::to_string(*options.replication_factor)
                     : std::string("of the broker's default"),
                 settings);
    // Creation propagates to every broker asynchronously.
    const absl::Time deadline = absl::Now() + options.request_timeout;
    do {
      metadata = ReadTopicMetadata(producer, options, options.request_timeout);
      if (metadata.ok() || absl::Now() > deadline) break;
      absl::SleepFor(absl::Milliseconds(100));
    } while (absl::IsNotFound(metadata.status()) || absl::IsUnavailable(metadata.status()));
  }
  if (!metadata.ok()) return fail(metadata.status());
  if (metadata->partitions != options.partitions) {
    spdlog::info("topic {} on {} has {} partitions (kafka_partitions = {} applies to new topics)",
                 options.topic, options.brokers, metadata->partitions, options.partitions);
  }
  if (existed) WarnAboutWeakerTopicSettings(producer, options, *metadata);
  return std::unique_ptr<KafkaEventLog>(
      new KafkaEventLog(options, std::move(context), producer, metadata->partitions));
}

// What one Append knows of its records, across the producers it used.
struct KafkaEventLog::AppendProgress {
  AppendProgress(size_t records, int32_t partitions)
      : written(records, false),
        produced(static_cast<size_t>(partitions)),
        start(static_cast<size_t>(partitions)),
        end(static_cast<size_t>(partitions)),
        unsure(static_cast<size_t>(partitions), false) {}

  std::vector<bool> written;  // acknowledged, or found in the topic
  // Per partition, the records produced to it that are or may be there, in the order they
  // were produced, since `start` (or the Append's start).
  std::vector<std::vector<size_t>> produced;
  // Where each partition ended before `produced`, when known: from the acknowledgements of
  // earlier Appends, or from reading it back.
  std::vector<std::optional<int64_t>> start;
  std::vector<std::optional<int64_t>> end;  // past the last record known to be there
  // Partitions that may hold records of this Append that were not acknowledged.
  std::vector<bool> unsure;
  size_t failed = 0;  // delivery reports that were errors
  size_t missing_reports = 0;

  // Takes in a pass's delivery reports.
  void Add(DeliveryTracker& tracker) {
    absl::MutexLock lock(&tracker.mu);
    for (size_t i = 0; i < tracker.deliveries.size(); ++i) {
      const RecordDelivery& d = tracker.deliveries[i];
      if (!d.produced) continue;
      if (!d.reported) {
        ++missing_reports;
        continue;
      }
      if (d.err != RD_KAFKA_RESP_ERR_NO_ERROR) ++failed;
      if (d.partition < 0 || static_cast<size_t>(d.partition) >= produced.size()) continue;
      const auto p = static_cast<size_t>(d.partition);
      // A record certainly not written is not part of what the partition may hold.
      if (d.err != RD_KAFKA_RESP_ERR_NO_ERROR && d.status == RD_KAFKA_MSG_STATUS_NOT_PERSISTED) {
        continue;
      }
      produced[p].push_back(i);
      if (d.err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        written[i] = true;
        if (d.offset >= 0) end[p] = std::max(end[p].value_or(0), d.offset + 1);
      } else {
        unsure[p] = true;
      }
    }
  }
};

absl::Status KafkaEventLog::Append(std::span<const OutgoingRecord> records) {
  absl::MutexLock lock(&append_mu_);
  const absl::Time start = absl::Now();
  absl::Status status;
  if (HasFatalError(producer())) {
    // Struck between two Appends: the last one returned before it, so nothing is left to check.
    spdlog::warn("{}; replacing the producer",
                 std::string(FatalErrorStatus(producer(), options_.topic).message()));
    status = RecreateProducer();
  }
  AppendProgress progress(records.size(), partition_count_);
  if (status.ok()) {
    progress.start = partition_ends_;
    progress.end = partition_ends_;
    status = AppendLocked(records, progress);
  }
  if (status.ok()) {
    partition_ends_ = progress.end;
  } else {
    // Records of this Append may still reach the topic after it returns.
    std::ranges::fill(partition_ends_, std::nullopt);
  }
  if (KafkaLogMetrics* metrics = options_.metrics) {
    metrics->append_seconds.Observe(absl::ToDoubleSeconds(absl::Now() - start));
    if (status.ok()) metrics->records_produced.Increment(records.size());
    metrics->delivery_failures.Increment(progress.failed);
  }
  return status;
}

absl::Status KafkaEventLog::AppendLocked(std::span<const OutgoingRecord> records,
                                         AppendProgress& progress) {
  constexpr int kMaxRecreations = 3;
  const absl::Time deadline = absl::Now() + options_.delivery_timeout + absl::Seconds(5);
  for (int recreations = 0;; ++recreations) {
    ProducePass pass = ProduceRecords(producer(), options_, records, progress.written, deadline);
    if (!pass.fatal) {
      progress.Add(*pass.tracker);
      return pass.status;
    }
    if (recreations == kMaxRecreations) {
      progress.Add(*pass.tracker);
      return pass.status;
    }
    spdlog::warn(
        "{}; replacing the producer and checking the topic for the records not "
        "acknowledged",
        std::string(pass.status.message()));
    // Purging the old producer fails what it still holds, with reports saying whether each
    // may have been written.
    RETURN_IF_ERROR(RecreateProducer());
    progress.Add(*pass.tracker);
    if (progress.missing_reports > 0) {
      return absl::UnavailableError(fmt::format(
          "{}; {} delivery reports did not arrive, so what reached the topic is not known",
          std::string(pass.status.message()), progress.missing_reports));
    }
    RETURN_IF_ERROR(FindWrittenRecords(records, progress));
    if (std::ranges::all_of(progress.written, [](bool w) { return w; })) return absl::OkStatus();
  }
}

absl::Status KafkaEventLog::RecreateProducer() {
  rd_kafka_t* old = producer();
  rd_kafka_purge(old, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  rd_kafka_flush(old, TimeoutMs(options_.request_timeout));  // serves the reports
  ASSIGN_OR_RETURN(rd_kafka_t * fresh, NewProducer(options_, context_.get()));
  {
    absl::MutexLock lock(&producer_mu_);
    producer_ = fresh;
  }
  rd_kafka_destroy(old);
  if (options_.metrics != nullptr) options_.metrics->producer_recreations.Increment();
  return absl::OkStatus();
}

absl::Status KafkaEventLog::FindWrittenRecords(std::span<const OutgoingRecord> records,
                                               AppendProgress& progress) {
  const auto partitions = static_cast<size_t>(partition_count_);
  std::vector<int64_t> from(partitions, 0);
  std::vector<int64_t> until(partitions, 0);
  std::vector<int64_t> next(partitions, 0);
  ASSIGN_OR_RETURN(std::unique_ptr<EventLogReader> reader, OpenReader());
  for (int32_t p = 0; p < partition_count_; ++p) {
    if (!progress.unsure[p]) {
      reader->Pause(p, true);
      continue;
    }
    ASSIGN_OR_RETURN(until[p], reader->EndOffset(p));
    if (progress.start[p].has_value()) {
      from[p] = *progress.start[p];
    } else {
      // Where the partition ended before this Append is not known: its records, the last ones
      // written there, are within as many records from the end as were produced to it.
      ASSIGN_OR_RETURN(const int64_t low, reader->StartOffset(p));
      from[p] = std::max(low, until[p] - static_cast<int64_t>(progress.produced[p].size()));
    }
    from[p] = std::min(from[p], until[p]);
    next[p] = from[p];
    RETURN_IF_ERROR(reader->Seek(p, from[p]));
  }
  std::vector<std::vector<std::string>> tail(partitions);  // [from, until) of each partition
  const absl::Time deadline = absl::Now() + options_.delivery_timeout;
  auto behind = [&] {
    for (size_t p = 0; p < partitions; ++p) {
      if (progress.unsure[p] && next[p] < until[p]) return true;
    }
    return false;
  };
  while (behind()) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(fmt::format(
          "reading back {} after replacing its producer did not finish in time", options_.topic));
    }
    RETURN_IF_ERROR(reader
                        ->Poll(1000, absl::Milliseconds(100),
                               [&](const LogRecordView& r) {
                                 const auto p = static_cast<size_t>(r.partition);
                                 if (!progress.unsure[p] || r.offset >= until[p]) return;
                                 tail[p].emplace_back(r.payload);
                                 next[p] = r.offset + 1;
                               })
                        .status());
  }
  size_t found = 0;
  for (size_t p = 0; p < partitions; ++p) {
    if (!progress.unsure[p]) continue;
    // What reached the partition is a prefix of what was produced to it (the idempotent
    // producer keeps a partition's order and leaves no gap), and the last records written
    // there: the longest prefix that ends the partition.
    const std::vector<size_t>& produced = progress.produced[p];
    const std::vector<std::string>& read = tail[p];
    size_t landed = std::min(produced.size(), read.size());
    for (; landed > 0; --landed) {
      const size_t first = read.size() - landed;
      bool equal = true;
      for (size_t i = 0; i < landed && equal; ++i) {
        equal = records[produced[i]].payload == read[first + i];
      }
      if (equal) break;
    }
    for (size_t i = 0; i < landed; ++i) {
      if (!progress.written[produced[i]]) {
        progress.written[produced[i]] = true;
        ++found;
      }
    }
    // The partition is settled up to here: the next pass starts afresh from its end.
    progress.start[p] = until[p];
    progress.end[p] = until[p];
    progress.produced[p].clear();
    progress.unsure[p] = false;
  }
  const auto unwritten = static_cast<size_t>(std::ranges::count(progress.written, false));
  spdlog::info("kafka producer: {} records not acknowledged were found in {}; {} remain to produce",
               found, options_.topic, unwritten);
  return absl::OkStatus();
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
  // Every partition's fetch queue forwards to the one consumer queue, and librdkafka 2.0
  // compares that queue's length with queued.min.messages for each partition: once the queue
  // holds that many records, every partition leaves the fetch list, and a broker thread looks
  // again only when something wakes it, up to a second later. At the default (100,000, a
  // fifth of a second of folding) a catch-up stalled for half a second at a time. The memory
  // bound stays queued.max.messages.kbytes (64 MiB of records by default).
  // bench/README.md, "The event log at scale", has the A/B.
  RETURN_IF_ERROR(config.Set("queued.min.messages", "1000000"));
  for (const auto& [key, value] : options_.properties) RETURN_IF_ERROR(config.Set(key, value));
  ASSIGN_OR_RETURN(rd_kafka_t * consumer, config.NewClient(RD_KAFKA_CONSUMER));
  rd_kafka_poll_set_consumer(consumer);
  return std::unique_ptr<EventLogReader>(new Reader(std::move(context), consumer, options_.topic,
                                                    partition_count_, options_.request_timeout));
}

}  // namespace switchyard
