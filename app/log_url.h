#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "app/config.h"
#include "engine/event_log.h"

namespace switchyard {

// Opens the log that `config.log_url` names: "embedded" (the RocksDB log under
// config.data_dir) or "kafka://HOST:PORT[,HOST:PORT...]/TOPIC". A malformed URL is an
// InvalidArgument error that quotes it.
absl::StatusOr<std::unique_ptr<EventLog>> OpenEventLog(const Config& config,
                                                       bool create_if_missing);

}  // namespace switchyard
