#pragma once

#include <signal.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "app/config.h"
#include "engine/event_log.h"
#include "storage/kafka_event_log.h"

namespace switchyard {

// Opens the log that `config.log_url` names: "embedded" (the RocksDB log under
// config.data_dir) or "kafka://HOST:PORT[,HOST:PORT...]/TOPIC". A malformed URL is an
// InvalidArgument error that quotes it.
// `memtable_bytes`: the embedded log's memtable gauge (EmbeddedEventLogOptions).
absl::StatusOr<std::unique_ptr<EventLog>> OpenEventLog(const Config& config, bool create_if_missing,
                                                       KafkaLogMetrics* kafka_metrics = nullptr,
                                                       Gauge* memtable_bytes = nullptr);

// Opens the log like OpenEventLog, for the long-running commands. A Kafka log that cannot be
// opened yet (no broker answers, the topic is missing and cannot be created, a timeout) is
// retried with a growing delay, up to 10 s, each failure logged as a warning that names the
// brokers, the topic and the reason. Meanwhile the calling thread waits on `stop_signals`
// (blocked in every thread by the caller): one of them ends the wait with Cancelled. Other
// errors (a malformed URL, an embedded log that cannot be opened) return at once.
absl::StatusOr<std::unique_ptr<EventLog>> OpenEventLogRetrying(const Config& config,
                                                               bool create_if_missing,
                                                               KafkaLogMetrics* kafka_metrics,
                                                               const sigset_t& stop_signals,
                                                               Gauge* memtable_bytes = nullptr);

// Waits up to `timeout` for one of `stop_signals` (blocked by the caller); true when one came.
bool WaitForStopSignal(const sigset_t& stop_signals, absl::Duration timeout);

// Whether a failure to open or read the log is worth retrying: the log's service is not
// there yet or did not answer in time.
bool IsRetryableLogError(const absl::Status& status);

}  // namespace switchyard
