#include "storage/internal/kafka_client.h"

#include <fmt/format.h>

#include <string>

namespace switchyard::storage_internal {

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

}  // namespace switchyard::storage_internal
