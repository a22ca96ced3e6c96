#include "app/log_url.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "storage/embedded_event_log.h"
#include "storage/kafka_event_log.h"

namespace switchyard {

absl::StatusOr<std::unique_ptr<EventLog>> OpenEventLog(const Config& config, bool create_if_missing,
                                                       KafkaLogMetrics* kafka_metrics,
                                                       Gauge* memtable_bytes) {
  const std::string& url = config.log_url;
  if (url == "embedded") {
    EmbeddedEventLogOptions options;
    options.sync_appends = config.sync;
    options.create_if_missing = create_if_missing;
    options.memtable_bytes = memtable_bytes;
    auto log = EmbeddedEventLog::Open(config.LogDir(), options);
    if (!log.ok()) return log.status();
    return std::unique_ptr<EventLog>(std::move(*log));
  }
  constexpr std::string_view kKafka = "kafka://";
  if (url.rfind(kKafka, 0) == 0) {
    const std::string rest = url.substr(kKafka.size());
    const size_t slash = rest.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == rest.size()) {
      return absl::InvalidArgumentError(
          fmt::format("log URL '{}' must look like kafka://HOST:PORT/TOPIC", url));
    }
    KafkaEventLogOptions options;
    options.brokers = rest.substr(0, slash);
    options.topic = rest.substr(slash + 1);
    options.partitions = config.kafka_partitions;
    options.replication_factor = config.kafka_replication_factor;
    options.min_insync_replicas = config.kafka_min_insync_replicas;
    options.retention_ms = config.kafka_retention_ms;
    options.metrics = kafka_metrics;
    options.properties = config.kafka_properties;
    auto log = KafkaEventLog::Open(options);
    if (!log.ok()) return log.status();
    return std::unique_ptr<EventLog>(std::move(*log));
  }
  return absl::InvalidArgumentError(
      fmt::format("log URL '{}' is neither 'embedded' nor kafka://HOST:PORT/TOPIC", url));
}

bool IsRetryableLogError(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsNotFound(status) ||
         absl::IsDeadlineExceeded(status);
}

bool WaitForStopSignal(const sigset_t& stop_signals, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    const timespec wait = absl::ToTimespec(left);
    if (sigtimedwait(&stop_signals, nullptr, &wait) > 0) return true;
    if (errno != EINTR || absl::Now() >= deadline) return false;
  }
}

absl::StatusOr<std::unique_ptr<EventLog>> OpenEventLogRetrying(const Config& config,
                                                               bool create_if_missing,
                                                               KafkaLogMetrics* kafka_metrics,
                                                               const sigset_t& stop_signals,
                                                               Gauge* memtable_bytes) {
  const bool kafka = config.log_url.rfind("kafka://", 0) == 0;
  absl::Duration delay = absl::Milliseconds(250);
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<std::unique_ptr<EventLog>> log =
        OpenEventLog(config, create_if_missing, kafka_metrics, memtable_bytes);
    if (log.ok() || !kafka || !IsRetryableLogError(log.status())) return log;
    spdlog::warn("cannot open the log {} (attempt {}): {}; retrying in {}", config.log_url, attempt,
                 std::string(log.status().message()), absl::FormatDuration(delay));
    if (WaitForStopSignal(stop_signals, delay)) {
      return absl::CancelledError(
          fmt::format("stopped while waiting for the log {}", config.log_url));
    }
    delay = std::min(delay * 2, absl::Seconds(10));
  }
}

}  // namespace switchyard
