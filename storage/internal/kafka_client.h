#pragma once

// What the Kafka log's files share about librdkafka: timeouts in its unit and its error codes
// as statuses.

#include <librdkafka/rdkafka.h>

#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace switchyard::storage_internal {

// A duration in librdkafka's unit (milliseconds).
int TimeoutMs(absl::Duration d);

// OK for no error; else a status of the code's kind (NotFound, DeadlineExceeded, DataLoss,
// InvalidArgument, FailedPrecondition for a fatal error, Unavailable for the rest) saying
// `what` and librdkafka's text.
absl::Status FromKafka(rd_kafka_resp_err_t err, std::string_view what);

}  // namespace switchyard::storage_internal
