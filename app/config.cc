#include "app/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "app/internal/config_reader.h"
#include "common/status.h"

namespace switchyard {
namespace {

using config_internal::CheckBaseUrl;
using config_internal::TableReader;

// Where, in the code of a TOML text (outside strings and comments), a quote may open a string:
// after the start of a line, '=', '[', ',' or '{', and after a dot where a key is read (a
// dotted key, also in a table header or an inline table), not where a value is (1.5); and never
// inside a bare value (a number, a date, true), which the parser reads up to a space, ',', ']',
// '}', '#' or a line break whatever else it meets (`x = 1['…` is one bare value).
class TomlCodeContext {
 public:
  // A character of code other than a quote, a space, a tab or a carriage return.
  void See(char c) {
    if (bare_) {
      if (c != ',' && c != ']' && c != '}' && c != '\n') {
        last_ = c;
        return;
      }
      bare_ = false;
    } else if (ValueMayBegin() && c != '[' && c != '{' && c != '\n') {
      bare_ = true;
      last_ = c;
      return;
    }
    switch (c) {
      case '\n':
        if (open_.empty()) in_value_ = false;  // a line break inside an array leaves its values
        break;
      case '=':
        in_value_ = true;
        break;
      case '[':
        open_.push_back('[');  // a table header at a line's start keeps reading a key
        break;
      case '{':
        open_.push_back('{');
        in_value_ = false;
        break;
      case ']':
      case '}':
        if (!open_.empty()) open_.pop_back();
        if (!open_.empty() || c == '}') in_value_ = true;  // what closed was a value
        break;
      case ',':
        in_value_ = !open_.empty() && open_.back() == '[';
        break;
      default:
        break;
    }
    last_ = c;
  }
  // A space, a tab, a carriage return or the start of a comment: the end of a bare value.
  void SeeSpace() { bare_ = false; }
  void SeeString(char quote) { last_ = quote; }
  bool StringMayBegin() const {
    if (bare_) return false;
    switch (last_) {
      case '\n':
      case '=':
      case '[':
      case ',':
      case '{':
        return true;
      case '.':
        return !in_value_;
      default:
        return false;
    }
  }
  char last() const { return last_; }
  bool in_bare_value() const { return bare_; }

 private:
  // Where a value begins: after '=', or after '[', ',' or a line break inside an array.
  bool ValueMayBegin() const {
    if (!in_value_) return false;
    if (last_ == '=') return true;
    return (last_ == '[' || last_ == ',' || last_ == '\n') && !open_.empty() && open_.back() == '[';
  }

  std::string open_;  // the arrays and inline tables open, innermost last
  bool in_value_ = false;
  bool bare_ = false;  // inside a bare value
  char last_ = '\n';
};

// toml++ 3.3 (Debian 12's) asks whether a non-ASCII character is whitespace wherever it may
// meet whitespace: outside strings and comments, and where a multi-line basic string skips
// what follows a line-ending backslash. For most characters that question reaches a
// __builtin_unreachable() (toml++ issues #190 and #295), so such text is refused here, before
// the parser sees it. Outside strings and comments TOML allows no non-ASCII character anyway,
// so only an invalid config gets another message; the one valid text refused is a multi-line
// string whose line, continued by a backslash, goes on with a non-ASCII character.
// A quote opens a string only where TOML lets one begin: elsewhere, as in `x = 1"…` or
// `x = 1.5."…`, the parser is still reading a bare value and asks its question of each
// character that follows, so such a quote is refused too (TomlCodeContext).
absl::Status CheckTomlParserCanRead(std::string_view text, const std::string& file) {
  enum class State { kCode, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };
  State state = State::kCode;
  bool after_line_ending_backslash = false;
  TomlCodeContext code;
  size_t line = 1;
  size_t column = 0;                                    // of the current code point, 1-based
  size_t i = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;  // a UTF-8 byte order mark
  auto refuse = [&](std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("{}:{}:{}: {}", file, line, column, what));
  };
  auto three = [&](char quote) {
    return i + 2 < text.size() && text[i + 1] == quote && text[i + 2] == quote;
  };
  for (; i < text.size(); ++i) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if ((byte & 0xC0) != 0x80) ++column;  // not a UTF-8 continuation byte
    if (c == '\n') {
      ++line;
      column = 0;
    }
    switch (state) {
      case State::kCode:
        if (byte >= 0x80) return refuse("a non-ASCII character outside a string or a comment");
        if (c == '#') {
          state = State::kComment;
          code.SeeSpace();
        } else if (c == '"' || c == '\'') {
          if (!code.StringMayBegin()) {
            return refuse(
                code.in_bare_value()
                    ? "a quote inside a bare value (a number, a date, true or false)"
                    : fmt::format("a quote after '{}', where no string may begin", code.last()));
          }
          code.SeeString(c);
          const bool multi = three(c);
          state = c == '"' ? (multi ? State::kMultiBasic : State::kBasic)
                           : (multi ? State::kMultiLiteral : State::kLiteral);
          if (multi) i += 2;
          column += multi ? 2 : 0;
        } else if (c == ' ' || c == '\t' || c == '\r') {
          code.SeeSpace();
        } else {
          code.See(c);
        }
        break;
      case State::kComment:
        if (c == '\n') {
          state = State::kCode;
          code.See('\n');
        }
        break;
      case State::kBasic:
        if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {
          ++i;
          if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++column;
        } else if (c == '"' || c == '\n') {
          state = State::kCode;
        }
        break;
      case State::kLiteral:
        if (c == '\'' || c == '\n') state = State::kCode;
        break;
      case State::kMultiBasic:
        if (after_line_ending_backslash) {
          if (c == ' ' || c == '\t' || c == '\r' || c == '\n') break;
          after_line_ending_backslash = false;
          if (byte >= 0x80) {
            return refuse(
                "a non-ASCII character first after a line-ending backslash (put it on the "
                "backslash's line, or escape it as \\uXXXX)");
          }
        }
        if (c == '\\' && i + 1 < text.size()) {
          const char next = text[i + 1];
          if (static_cast<unsigned char>(next) >= 0x80) {
            ++column;
            return refuse("a non-ASCII character after a backslash");
          }
          after_line_ending_backslash = next == ' ' || next == '\t' || next == '\r' || next == '\n';
          if (!after_line_ending_backslash) {
            ++i;
            ++column;
          }
        } else if (c == '"' && three('"')) {
          while (i + 1 < text.size() && text[i + 1] == '"') {
            ++i;
            ++column;
          }
          state = State::kCode;
        }
        break;
      case State::kMultiLiteral:
        if (c == '\'' && three('\'')) {
          while (i + 1 < text.size() && text[i + 1] == '\'') {
            ++i;
            ++column;
          }
          state = State::kCode;
        }
        break;
    }
  }
  return absl::OkStatus();
}

// [ingest] endpoints = [{url, pubsub_url}], or base_url (+ pubsub_url) for one endpoint.
absl::Status ReadIngestEndpoints(TableReader& ingest, const std::string& file,
                                 std::vector<IngestEndpointConfig>* out) {
  const toml::node* endpoints = ingest.Node("endpoints");
  const bool has_base_url = ingest.Node("base_url") != nullptr;
  const bool has_pubsub_url = ingest.Node("pubsub_url") != nullptr;
  if (endpoints == nullptr) {
    IngestEndpointConfig single;
    RETURN_IF_ERROR(ingest.ReadString("base_url", &single.url));
    RETURN_IF_ERROR(ingest.ReadString("pubsub_url", &single.pubsub_url));
    if (!has_base_url) {
      if (has_pubsub_url) return ingest.Error("pubsub_url", "needs base_url");
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(CheckBaseUrl(ingest, "base_url", single.url, /*pubsub=*/false));
    if (!single.pubsub_url.empty()) {
      RETURN_IF_ERROR(CheckBaseUrl(ingest, "pubsub_url", single.pubsub_url, /*pubsub=*/true));
    }
    out->push_back(std::move(single));
    return absl::OkStatus();
  }
  if (has_base_url || has_pubsub_url) {
    return ingest.Error(has_base_url ? "base_url" : "pubsub_url",
                        "cannot be set together with 'ingest.endpoints' (give each endpoint's "
                        "pubsub_url in its table)");
  }
  if (!endpoints->is_array() || endpoints->as_array()->empty()) {
    return ingest.Error("endpoints", "must be a non-empty array of {url, pubsub_url} tables");
  }
  const toml::array& list = *endpoints->as_array();
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_table()) {
      return absl::InvalidArgumentError(fmt::format(
          "{}: 'ingest.endpoints[{}]' must be a table {{url = \"...\", pubsub_url = \"...\"}}",
          file, i));
    }
    TableReader element(*list[i].as_table(), fmt::format("ingest.endpoints[{}].", i), file);
    IngestEndpointConfig endpoint;
    if (list[i].as_table()->get("url") == nullptr) return element.Error("url", "is required");
    RETURN_IF_ERROR(element.ReadString("url", &endpoint.url));
    RETURN_IF_ERROR(element.ReadString("pubsub_url", &endpoint.pubsub_url));
    RETURN_IF_ERROR(element.CheckNoUnknownKeys());
    RETURN_IF_ERROR(CheckBaseUrl(element, "url", endpoint.url, /*pubsub=*/false));
    if (!endpoint.pubsub_url.empty()) {
      RETURN_IF_ERROR(CheckBaseUrl(element, "pubsub_url", endpoint.pubsub_url, /*pubsub=*/true));
    }
    out->push_back(std::move(endpoint));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Config> ParseConfig(std::string_view text, std::string_view source,
                                   ConfigFiles files) {
  Config config;
  const std::string file(source);
  RETURN_IF_ERROR(CheckTomlParserCanRead(text, file));
  // toml++ is built with exceptions here: this is the one place that catches them.
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    return absl::InvalidArgumentError(fmt::format("{}:{}:{}: {}", file, error.source().begin.line,
                                                  error.source().begin.column,
                                                  error.description()));
  }
  config.source = file;
  static const absl::flat_hash_set<std::string> kSections = {
      "storage",         "log",     "fold",      "api",     "admin",   "router",
      "consistency",     "routing", "upstreams", "ers",     "ingest",  "pubsub",
      "upstream_health", "cache",   "access",    "keys",    "regions", "registry",
      "er_probe",        "verify",  "integrity", "snapshot"};
  for (const auto& [key, node] : root) {
    if (!kSections.contains(std::string(key.str()))) {
      return absl::InvalidArgumentError(fmt::format("{}: unknown key '{}'", file, key.str()));
    }
    if (key.str() == "keys") continue;  // [[keys]], read with [access]
    if (key.str() == "ers" || key.str() == "regions") {
      if (!node.is_array_of_tables()) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: '{}' must be an array of tables ([[{}]])", file, key.str(), key.str()));
      }
      continue;
    }
    if (!node.is_table()) {
      return absl::InvalidArgumentError(fmt::format("{}: '{}' must be a table", file, key.str()));
    }
  }
  static const toml::table kEmpty;
  const config_internal::SectionOf section = [&](const char* name) -> const toml::table& {
    const toml::table* t = root[name].as_table();
    return t != nullptr ? *t : kEmpty;
  };

  TableReader storage(section("storage"), "storage.", file);
  int64_t block_cache_mb = static_cast<int64_t>(config.block_cache_mb);
  RETURN_IF_ERROR(storage.ReadString("data_dir", &config.data_dir));
  RETURN_IF_ERROR(storage.ReadBool("sync", &config.sync));
  // Used as block_cache_mb << 20 bytes.
  RETURN_IF_ERROR(storage.ReadPositive("block_cache_mb", &block_cache_mb,
                                       std::numeric_limits<size_t>::max() >> 20));
  RETURN_IF_ERROR(
      storage.ReadSize("ingest_min_rows", &config.ingest_min_rows, /*allow_zero=*/true));
  RETURN_IF_ERROR(storage.CheckNoUnknownKeys());
  config.block_cache_mb = static_cast<size_t>(block_cache_mb);

  TableReader log(section("log"), "log.", file);
  int64_t partitions = config.kafka_partitions;
  RETURN_IF_ERROR(log.ReadString("url", &config.log_url));
  RETURN_IF_ERROR(
      log.ReadPositive("kafka_partitions", &partitions, std::numeric_limits<int32_t>::max()));
  if (const toml::node* properties = log.Node("kafka_properties")) {
    if (!properties->is_table()) return log.Error("kafka_properties", "must be a table of strings");
    for (const auto& [name, value] : *properties->as_table()) {
      if (!value.is_string()) {
        return log.Error(fmt::format("kafka_properties.\"{}\"", name.str()), "must be a string");
      }
      config.kafka_properties.emplace_back(std::string(name.str()), value.as_string()->get());
    }
  }
  int64_t replication_factor = 0;
  if (log.Node("kafka_replication_factor") != nullptr) {
    RETURN_IF_ERROR(log.ReadPositive("kafka_replication_factor", &replication_factor,
                                     std::numeric_limits<int16_t>::max()));
    config.kafka_replication_factor = static_cast<int16_t>(replication_factor);
  }
  int64_t min_insync = 0;
  if (log.Node("kafka_min_insync_replicas") != nullptr) {
    RETURN_IF_ERROR(log.ReadPositive("kafka_min_insync_replicas", &min_insync,
                                     std::numeric_limits<int16_t>::max()));
    config.kafka_min_insync_replicas = static_cast<int32_t>(min_insync);
  }
  if (config.kafka_replication_factor && config.kafka_min_insync_replicas &&
      *config.kafka_min_insync_replicas > *config.kafka_replication_factor) {
    return log.Error(
        "kafka_min_insync_replicas",
        fmt::format("is {}, more than log.kafka_replication_factor = {}: no append "
                    "could ever be acknowledged",
                    *config.kafka_min_insync_replicas, *config.kafka_replication_factor));
  }
  if (const toml::node* retention = log.Node("kafka_retention_ms")) {
    const std::optional<int64_t> ms = retention->value<int64_t>();
    if (!retention->is_integer() || !ms.has_value() || (*ms <= 0 && *ms != -1)) {
      return log.Error("kafka_retention_ms",
                       "must be a positive number of milliseconds, or -1 to keep every record");
    }
    config.kafka_retention_ms = *ms;
  }
  RETURN_IF_ERROR(log.CheckNoUnknownKeys());
  config.kafka_partitions = static_cast<int32_t>(partitions);

  TableReader fold(section("fold"), "fold.", file);
  auto batch = static_cast<int64_t>(config.fold.max_batch_records);
  auto pending = static_cast<int64_t>(config.fold.fold.max_pending_per_partition);
  RETURN_IF_ERROR(fold.ReadPositive("max_batch_records", &batch));
  RETURN_IF_ERROR(fold.ReadMillis("publish_interval_ms", &config.fold.publish_interval));
  RETURN_IF_ERROR(fold.ReadPositive("max_pending_per_partition", &pending));
  RETURN_IF_ERROR(fold.ReadBool("pipelined_commits", &config.fold.pipelined_commits));
  RETURN_IF_ERROR(fold.CheckNoUnknownKeys());
  config.fold.max_batch_records = static_cast<size_t>(batch);
  config.fold.fold.max_pending_per_partition = static_cast<size_t>(pending);

  TableReader ingest(section("ingest"), "ingest.", file);
  RETURN_IF_ERROR(ReadIngestEndpoints(ingest, file, &config.ingest.endpoints));
  RETURN_IF_ERROR(ingest.ReadBool("verify_tls", &config.ingest.verify_tls));
  RETURN_IF_ERROR(ingest.ReadString("tls_ca_file", &config.ingest.tls_ca_file));
  RETURN_IF_ERROR(ingest.ReadMillis("reconcile_interval_ms", &config.ingest.reconcile_interval_ms));
  RETURN_IF_ERROR(ingest.ReadPositive("max_lag_slots", &config.ingest.max_lag_slots));
  RETURN_IF_ERROR(ingest.ReadMillis("probe_interval_ms", &config.ingest.probe_interval_ms));
  RETURN_IF_ERROR(ingest.CheckNoUnknownKeys());

  RETURN_IF_ERROR(config_internal::ReadServeConfig(root, section, file, files, &config.serve));
  // A replica must find in the topic the offsets of the snapshot before the newest too.
  if (!config.serve.snapshot_dir.empty() && config.kafka_retention_ms.has_value() &&
      *config.kafka_retention_ms > 0 &&
      absl::Milliseconds(*config.kafka_retention_ms) < 2 * config.serve.snapshot_interval) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: 'log.kafka_retention_ms' is {}, less than twice snapshot.interval_s ({} s): a "
        "replica could need a snapshot whose offsets the topic no longer holds",
        file, *config.kafka_retention_ms, absl::ToInt64Seconds(config.serve.snapshot_interval)));
  }
  return config;
}

// Read as toml::parse_file reads a file, with its messages, so that a file loads as it did
// before ParseConfig.
absl::StatusOr<Config> LoadConfig(const std::optional<std::string>& path) {
  if (!path) return Config();
  std::ifstream in(*path, std::ios::in | std::ios::binary | std::ios::ate);
  if (!in.is_open()) {
    return absl::InvalidArgumentError(
        fmt::format("{}:0:0: File could not be opened for reading", *path));
  }
  const std::streamoff size = in.tellg();
  if (size == -1) {
    return absl::InvalidArgumentError(fmt::format("{}:0:0: Could not determine file size", *path));
  }
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  return ParseConfig(text, *path);
}

}  // namespace switchyard
