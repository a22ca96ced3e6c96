#include "app/log_url.h"

#include <fmt/format.h>

#include "storage/embedded_event_log.h"
#include "storage/kafka_event_log.h"

namespace switchyard {

absl::StatusOr<std::unique_ptr<EventLog>> OpenEventLog(const Config& config,
                                                       bool create_if_missing) {
  const std::string& url = config.log_url;
  if (url == "embedded") {
    EmbeddedEventLogOptions options;
    options.sync_appends = config.sync;
    options.create_if_missing = create_if_missing;
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
    auto log = KafkaEventLog::Open(options);
    if (!log.ok()) return log.status();
    return std::unique_ptr<EventLog>(std::move(*log));
  }
  return absl::InvalidArgumentError(
      fmt::format("log URL '{}' is neither 'embedded' nor kafka://HOST:PORT/TOPIC", url));
}

}  // namespace switchyard
