#include "app/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include "absl/container/flat_hash_set.h"
#include "common/status.h"

namespace switchyard {
namespace {

// Reads typed keys from one table and reports any key it was not asked about.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string prefix, std::string file)
      : table_(table), prefix_(std::move(prefix)), file_(std::move(file)) {}

  absl::Status ReadString(const char* key, std::string* out) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (node == nullptr) return absl::OkStatus();
    if (!node->is_string()) return TypeError(key, "a string");
    *out = node->as_string()->get();
    return absl::OkStatus();
  }
  absl::Status ReadBool(const char* key, bool* out) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (node == nullptr) return absl::OkStatus();
    if (!node->is_boolean()) return TypeError(key, "true or false");
    *out = node->as_boolean()->get();
    return absl::OkStatus();
  }
  absl::Status ReadPositive(const char* key, int64_t* out) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (node == nullptr) return absl::OkStatus();
    if (!node->is_integer() || node->as_integer()->get() <= 0) {
      return TypeError(key, "a positive integer");
    }
    *out = node->as_integer()->get();
    return absl::OkStatus();
  }
  absl::Status CheckNoUnknownKeys() const {
    for (const auto& [key, node] : table_) {
      if (!seen_.contains(std::string(key.str()))) {
        return absl::InvalidArgumentError(
            fmt::format("{}: unknown key '{}{}'", file_, prefix_, key.str()));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status TypeError(const char* key, const char* expected) const {
    return absl::InvalidArgumentError(
        fmt::format("{}: '{}{}' must be {}", file_, prefix_, key, expected));
  }

  const toml::table& table_;
  std::string prefix_;
  std::string file_;
  absl::flat_hash_set<std::string> seen_;
};

}  // namespace

absl::StatusOr<Config> LoadConfig(const std::optional<std::string>& path) {
  Config config;
  if (!path) return config;
  // toml++ is built with exceptions here: this is the one place that catches them.
  toml::table root;
  try {
    root = toml::parse_file(*path);
  } catch (const toml::parse_error& error) {
    return absl::InvalidArgumentError(fmt::format("{}:{}:{}: {}", *path, error.source().begin.line,
                                                  error.source().begin.column,
                                                  error.description()));
  }
  static const absl::flat_hash_set<std::string> kSections = {"storage", "log", "fold"};
  for (const auto& [key, node] : root) {
    if (!kSections.contains(std::string(key.str()))) {
      return absl::InvalidArgumentError(fmt::format("{}: unknown key '{}'", *path, key.str()));
    }
    if (!node.is_table()) {
      return absl::InvalidArgumentError(fmt::format("{}: '{}' must be a table", *path, key.str()));
    }
  }
  static const toml::table kEmpty;
  auto section = [&](const char* name) -> const toml::table& {
    const toml::table* t = root[name].as_table();
    return t != nullptr ? *t : kEmpty;
  };

  TableReader storage(section("storage"), "storage.", *path);
  int64_t block_cache_mb = static_cast<int64_t>(config.block_cache_mb);
  RETURN_IF_ERROR(storage.ReadString("data_dir", &config.data_dir));
  RETURN_IF_ERROR(storage.ReadBool("sync", &config.sync));
  RETURN_IF_ERROR(storage.ReadPositive("block_cache_mb", &block_cache_mb));
  RETURN_IF_ERROR(storage.CheckNoUnknownKeys());
  config.block_cache_mb = static_cast<size_t>(block_cache_mb);

  TableReader log(section("log"), "log.", *path);
  int64_t partitions = config.kafka_partitions;
  RETURN_IF_ERROR(log.ReadString("url", &config.log_url));
  RETURN_IF_ERROR(log.ReadPositive("kafka_partitions", &partitions));
  RETURN_IF_ERROR(log.CheckNoUnknownKeys());
  config.kafka_partitions = static_cast<int32_t>(partitions);

  TableReader fold(section("fold"), "fold.", *path);
  auto batch = static_cast<int64_t>(config.fold.max_batch_records);
  int64_t publish_ms = absl::ToInt64Milliseconds(config.fold.publish_interval);
  auto pending = static_cast<int64_t>(config.fold.fold.max_pending_per_partition);
  RETURN_IF_ERROR(fold.ReadPositive("max_batch_records", &batch));
  RETURN_IF_ERROR(fold.ReadPositive("publish_interval_ms", &publish_ms));
  RETURN_IF_ERROR(fold.ReadPositive("max_pending_per_partition", &pending));
  RETURN_IF_ERROR(fold.CheckNoUnknownKeys());
  config.fold.max_batch_records = static_cast<size_t>(batch);
  config.fold.publish_interval = absl::Milliseconds(publish_ms);
  config.fold.fold.max_pending_per_partition = static_cast<size_t>(pending);
  return config;
}

}  // namespace switchyard
