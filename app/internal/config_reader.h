#pragma once

// What app/config*.cc read a config with: a reader of one table's typed keys that reports the
// keys it was not asked about, and the readers and checks that several sections share.

#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "app/config.h"
#include "common/pubkey.h"
#include "common/status.h"
#include "fmt/format.h"

namespace switchyard::config_internal {

// A top-level section's table by name, or an empty table when the config has none.
using SectionOf = std::function<const toml::table&(const char* name)>;

// A browser's Origin: "http(s)://host[:port]" in lower case, nothing after.
bool IsOrigin(std::string_view text);

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
  // A positive integer up to `max` (the largest value the field it goes into can hold).
  absl::Status ReadPositive(const char* key, int64_t* out, uint64_t max = kInt64Max) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (node == nullptr) return absl::OkStatus();
    if (!node->is_integer() || node->as_integer()->get() <= 0) {
      return TypeError(key, "a positive integer");
    }
    RETURN_IF_ERROR(CheckAtMost(key, node->as_integer()->get(), 1, max));
    *out = node->as_integer()->get();
    return absl::OkStatus();
  }
  absl::Status ReadNonNegative(const char* key, int64_t* out, uint64_t max = kInt64Max) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (node == nullptr) return absl::OkStatus();
    if (!node->is_integer() || node->as_integer()->get() < 0) {
      return TypeError(key, "a non-negative integer");
    }
    RETURN_IF_ERROR(CheckAtMost(key, node->as_integer()->get(), 0, max));
    *out = node->as_integer()->get();
    return absl::OkStatus();
  }
  // An unsigned field: a value it cannot hold is refused, never wrapped.
  template <typename T>
  absl::Status ReadSize(const char* key, T* out, bool allow_zero = false) {
    static_assert(std::is_unsigned_v<T>);
    int64_t value = static_cast<int64_t>(*out);
    const uint64_t max = std::numeric_limits<T>::max();
    RETURN_IF_ERROR(allow_zero ? ReadNonNegative(key, &value, max)
                               : ReadPositive(key, &value, max));
    *out = static_cast<T>(value);
    return absl::OkStatus();
  }
  // A positive count of 2^shift bytes (a size in KiB or MiB), stored in bytes.
  absl::Status ReadScaledSize(const char* key, size_t* bytes, int shift) {
    int64_t units = static_cast<int64_t>(*bytes >> shift);
    RETURN_IF_ERROR(ReadPositive(key, &units, std::numeric_limits<size_t>::max() >> shift));
    *bytes = static_cast<size_t>(units) << shift;
    return absl::OkStatus();
  }
  // A duration in milliseconds (`*_ms`), from 1 (or 0 with allow_zero) to
  // kMaxConfigDurationMs.
  absl::Status ReadMillis(const char* key, absl::Duration* out, bool allow_zero = false) {
    int64_t ms = absl::ToInt64Milliseconds(*out);
    RETURN_IF_ERROR(ReadMillis(key, &ms, allow_zero));
    *out = absl::Milliseconds(ms);
    return absl::OkStatus();
  }
  absl::Status ReadMillis(const char* key, int64_t* ms, bool allow_zero = false) {
    return allow_zero ? ReadNonNegative(key, ms, kMaxConfigDurationMs)
                      : ReadPositive(key, ms, kMaxConfigDurationMs);
  }
  // A duration in whole seconds (`*_s`), from 1 to kMaxConfigDurationMs / 1000.
  absl::Status ReadSeconds(const char* key, absl::Duration* out) {
    int64_t s = absl::ToInt64Seconds(*out);
    RETURN_IF_ERROR(ReadPositive(key, &s, kMaxConfigDurationMs / 1000));
    *out = absl::Seconds(s);
    return absl::OkStatus();
  }
  // A number within [min, max] (an integer is taken as a number).
  absl::Status ReadFraction(const char* key, double* out, double min = 0, double max = 1) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (node == nullptr) return absl::OkStatus();
    double value = 0;
    if (node->is_floating_point()) {
      value = node->as_floating_point()->get();
    } else if (node->is_integer()) {
      value = static_cast<double>(node->as_integer()->get());
    } else {
      return TypeError(key, "a number");
    }
    if (!(value >= min && value <= max)) {
      return absl::InvalidArgumentError(
          fmt::format("{}: '{}{}' must be within [{}, {}]", file_, prefix_, key, min, max));
    }
    *out = value;
    return absl::OkStatus();
  }
  // "HOST:PORT"; port 0 picks a free port.
  absl::Status ReadListen(const char* key, std::string* address, uint16_t* port) {
    std::string text;
    bool present = table_.get(key) != nullptr;
    RETURN_IF_ERROR(ReadString(key, &text));
    if (!present) return absl::OkStatus();
    const size_t colon = text.rfind(':');
    const std::string port_text = colon == std::string::npos ? "" : text.substr(colon + 1);
    std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    if (host.empty() || port_text.empty() || port_text.size() > 5 ||
        port_text.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(port_text) > 65535) {
      return TypeError(key, "\"HOST:PORT\" with a port from 0 to 65535");
    }
    *address = host;
    *port = static_cast<uint16_t>(std::stoul(port_text));
    return absl::OkStatus();
  }
  absl::Status ReadPubkey(const char* key, Pubkey* out, bool required = false) {
    std::string text;
    const bool present = table_.get(key) != nullptr;
    if (!present && required) {
      return absl::InvalidArgumentError(fmt::format("{}: '{}{}' is required", file_, prefix_, key));
    }
    RETURN_IF_ERROR(ReadString(key, &text));
    if (!present) return absl::OkStatus();
    absl::StatusOr<Pubkey> key_value = Pubkey::FromBase58(text);
    if (!key_value.ok()) return TypeError(key, "a base58 public key");
    *out = *key_value;
    return absl::OkStatus();
  }
  // An array of "*" (alone) or exact origins, "scheme://host[:port]" as a browser sends them
  // in Origin; empty turns CORS off.
  absl::Status ReadCorsOrigins(const char* key, std::vector<std::string>* out) {
    seen_.insert(key);
    const toml::node* node = table_.get(key);
    if (node == nullptr) return absl::OkStatus();
    const toml::array* array = node->as_array();
    if (array == nullptr) return TypeError(key, "an array of origins (\"*\" for any)");
    std::vector<std::string> origins;
    for (const toml::node& item : *array) {
      if (!item.is_string()) return TypeError(key, "an array of origins (\"*\" for any)");
      const std::string& origin = item.as_string()->get();
      if (origin != "*" && !IsOrigin(origin)) {
        return Error(key, fmt::format("has \"{}\", which is not \"*\" nor an origin "
                                      "(\"https://host[:port]\", no path)",
                                      origin));
      }
      origins.push_back(origin);
    }
    if (origins.size() > 1 && std::ranges::find(origins, "*") != origins.end()) {
      return Error(key, "lists \"*\" with other origins: \"*\" must stand alone");
    }
    *out = std::move(origins);
    return absl::OkStatus();
  }
  const toml::node* Node(const char* key) {
    seen_.insert(key);
    return table_.get(key);
  }
  absl::Status Error(const std::string& key, const std::string& message) const {
    return absl::InvalidArgumentError(fmt::format("{}: '{}{}' {}", file_, prefix_, key, message));
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
  static constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();

  absl::Status TypeError(const char* key, const char* expected) const {
    return absl::InvalidArgumentError(
        fmt::format("{}: '{}{}' must be {}", file_, prefix_, key, expected));
  }
  absl::Status CheckAtMost(const char* key, int64_t value, int64_t min, uint64_t max) const {
    if (static_cast<uint64_t>(value) <= max) return absl::OkStatus();
    return absl::InvalidArgumentError(
        fmt::format("{}: '{}{}' must be an integer from {} to {}, not {}", file_, prefix_, key, min,
                    max, value));
  }

  const toml::table& table_;
  std::string prefix_;
  std::string file_;
  absl::flat_hash_set<std::string> seen_;
};

// A usable base-layer URL: http(s) for the JSON-RPC, ws(s) for the pubsub.
absl::Status CheckBaseUrl(const TableReader& table, const std::string& key, const std::string& url,
                          bool pubsub);
// A rate and its burst: `<rate_key>` per second, `<burst_key>` at once (0: one second's worth).
absl::Status ReadRateLimit(TableReader& table, const char* rate_key, const char* burst_key,
                           RateLimit* out);
// An array of method names.
absl::Status ReadMethodList(TableReader& table, const char* key, std::vector<std::string>* out);
// Both files or neither; readable, PEM, and a matching pair: the key named is the file at fault.
// With ConfigFiles::kSkip, only both or neither.
absl::Status CheckTls(const TableReader& api, const TlsOptions& tls, ConfigFiles files);
// [[regions]] name, url, ranges; and api.region / api.default_region naming one of them.
absl::Status ReadRegions(const toml::table& root, const TableReader& api, const std::string& file,
                         RegionOptions* out);

// The sections `serve` reads beyond storage, log, fold and ingest (config_serve.cc).
absl::Status ReadServeConfig(const toml::table& root, const SectionOf& section,
                             const std::string& file, ConfigFiles files, ServeConfig* serve);
// [access] and [[keys]], and the key file they name (config_access.cc).
absl::Status ReadAccess(const toml::table& root, const SectionOf& section, const std::string& file,
                        ConfigFiles files, ServeConfig* serve);

}  // namespace switchyard::config_internal
