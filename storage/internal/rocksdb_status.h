#pragma once

#include <rocksdb/status.h>

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace switchyard::storage_internal {

// Converts a RocksDB status into an absl::Status, naming what was being done.
inline absl::Status FromRocksDb(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(std::string(what), ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(message);
  if (s.IsIOError()) return absl::UnavailableError(message);
  if (s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return absl::UnavailableError(message);
  if (s.IsNotSupported()) return absl::UnimplementedError(message);
  return absl::InternalError(message);
}

}  // namespace switchyard::storage_internal
