#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/fold_runner.h"

namespace switchyard {

// The process configuration, read once at start-up from a TOML file. Every key is optional;
// unknown keys and wrong types are errors that name the key and the file.
//
//   [storage]
//   data_dir = "switchyard-data"   # holds log/ (the embedded log) and state/ (RocksDB)
//   sync = true                    # fsync every log append and fold commit
//   block_cache_mb = 32
//
//   [log]
//   url = "embedded"               # or "kafka://HOST:PORT[,HOST:PORT...]/TOPIC"
//   kafka_partitions = 12          # when Switchyard creates the topic
//
//   [fold]
//   max_batch_records = 50000
//   publish_interval_ms = 50
//   max_pending_per_partition = 200000
struct Config {
  std::string data_dir = "switchyard-data";
  bool sync = true;
  size_t block_cache_mb = 32;
  std::string log_url = "embedded";
  int32_t kafka_partitions = 12;
  FoldRunnerOptions fold;

  std::string LogDir() const { return data_dir + "/log"; }
  std::string StateDir() const { return data_dir + "/state"; }
};

// Reads `path`; with no path, the defaults.
absl::StatusOr<Config> LoadConfig(const std::optional<std::string>& path);

}  // namespace switchyard
