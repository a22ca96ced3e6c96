#include "app/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <type_traits>

#include "absl/container/flat_hash_set.h"
#include "common/pubkey.h"
#include "common/status.h"
#include "common/url.h"

namespace switchyard {
namespace {

// A browser's Origin: "http(s)://host[:port]" in lower case, nothing after.
bool IsOrigin(std::string_view text) {
  size_t scheme = 0;
  if (text.starts_with("https://")) {
    scheme = 8;
  } else if (text.starts_with("http://")) {
    scheme = 7;
  } else {
    return false;
  }
  const std::string_view rest = text.substr(scheme);
  if (rest.empty()) return false;
  for (const char c : rest) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
                         c == ':' || c == '[' || c == ']';
    if (!allowed) return false;
  }
  return true;
}

// toml++ 3.3 (Debian 12's) asks whether a non-ASCII character is whitespace wherever it may
// meet whitespace: outside strings and comments, and where a multi-line basic string skips
// what follows a line-ending backslash. For most characters that question reaches a
// __builtin_unreachable() (toml++ issues #190 and #295), so such text is refused here, before
// the parser sees it. Outside strings and comments TOML allows no non-ASCII character anyway,
// so only an invalid config gets another message; the one valid text refused is a multi-line
// string whose line, continued by a backslash, goes on with a non-ASCII character.
absl::Status CheckTomlParserCanRead(std::string_view text, const std::string& file) {
  enum class State { kCode, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };
  State state = State::kCode;
  bool after_line_ending_backslash = false;
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
        } else if (c == '"' || c == '\'') {
          const bool multi = three(c);
          state = c == '"' ? (multi ? State::kMultiBasic : State::kBasic)
                           : (multi ? State::kMultiLiteral : State::kLiteral);
          if (multi) i += 2;
          column += multi ? 2 : 0;
        }
        break;
      case State::kComment:
        if (c == '\n') state = State::kCode;
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
  absl::Status ReadMillis(const char* key, absl::Duration* out, bool allow_zero = false) {
    int64_t ms = absl::ToInt64Milliseconds(*out);
    RETURN_IF_ERROR(allow_zero ? ReadNonNegative(key, &ms) : ReadPositive(key, &ms));
    *out = absl::Milliseconds(ms);
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
                          bool pubsub) {
  absl::StatusOr<Url> parsed = ParseUrl(url);
  if (!parsed.ok()) {
    return table.Error(
        key, fmt::format("is not a usable URL: {}", std::string(parsed.status().message())));
  }
  const bool ws = parsed->scheme == Url::Scheme::kWs || parsed->scheme == Url::Scheme::kWss;
  if (ws != pubsub) {
    return table.Error(
        key, pubsub ? "must be a ws:// or wss:// URL" : "must be an http:// or https:// URL");
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

// A rate and its burst: `<rate_key>` per second, `<burst_key>` at once (0: one second's worth).
absl::Status ReadRateLimit(TableReader& table, const char* rate_key, const char* burst_key,
                           RateLimit* out) {
  RETURN_IF_ERROR(table.ReadFraction(rate_key, &out->per_second, 0, 1e9));
  RETURN_IF_ERROR(table.ReadFraction(burst_key, &out->burst, 0, 1e9));
  if (out->burst > 0 && out->per_second == 0) {
    return table.Error(burst_key, fmt::format("needs '{}'", rate_key));
  }
  return absl::OkStatus();
}

// Both files or neither; readable, PEM, and a matching pair: the key named is the file at fault.
// With ConfigFiles::kSkip, only both or neither.
absl::Status CheckTls(const TableReader& api, const TlsOptions& tls, ConfigFiles files) {
  if (!tls.enabled()) return absl::OkStatus();
  if (tls.certificate_file.empty()) {
    return api.Error("tls_cert_file", "is required with api.tls_key_file");
  }
  if (tls.private_key_file.empty()) {
    return api.Error("tls_key_file", "is required with api.tls_cert_file");
  }
  if (files == ConfigFiles::kSkip) return absl::OkStatus();
  TlsFile failed = TlsFile::kCertificate;
  absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> context =
      LoadServerTlsContext(tls, &failed);
  if (!context.ok()) {
    return api.Error(failed == TlsFile::kCertificate ? "tls_cert_file" : "tls_key_file",
                     fmt::format("is not usable: {}", std::string(context.status().message())));
  }
  return absl::OkStatus();
}

absl::Status ReadMethodList(TableReader& table, const char* key, std::vector<std::string>* out) {
  const toml::node* node = table.Node(key);
  if (node == nullptr) return absl::OkStatus();
  const toml::array* array = node->as_array();
  if (array == nullptr) return table.Error(key, "must be an array of method names");
  for (const toml::node& item : *array) {
    if (!item.is_string() || item.as_string()->get().empty()) {
      return table.Error(key, "must be an array of method names");
    }
    out->push_back(item.as_string()->get());
  }
  return absl::OkStatus();
}

// [[keys]] of the config or of a key file.
absl::Status ReadApiKeys(const toml::node* keys, const std::string& file,
                         std::vector<ApiKeyOptions>* out) {
  if (keys == nullptr) return absl::OkStatus();
  if (!keys->is_array_of_tables()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: 'keys' must be an array of tables ([[keys]])", file));
  }
  const toml::array& list = *keys->as_array();
  for (size_t i = 0; i < list.size(); ++i) {
    const toml::table& entry = *list[i].as_table();
    std::string name;
    if (const toml::node* n = entry.get("name"); n != nullptr && n->is_string()) {
      name = n->as_string()->get();
    }
    // Errors name the key by its name (never by its secret), or by its place.
    TableReader table(
        entry, name.empty() ? fmt::format("keys[{}].", i) : fmt::format("keys[\"{}\"].", name),
        file);
    ApiKeyOptions key;
    if (entry.get("name") == nullptr) return table.Error("name", "is required");
    if (entry.get("key") == nullptr) return table.Error("key", "is required");
    RETURN_IF_ERROR(table.ReadString("name", &key.name));
    RETURN_IF_ERROR(table.ReadString("key", &key.key));
    RETURN_IF_ERROR(ReadMethodList(table, "allowed_methods", &key.allowed_methods));
    RETURN_IF_ERROR(ReadMethodList(table, "denied_methods", &key.denied_methods));
    RETURN_IF_ERROR(ReadRateLimit(table, "requests_per_second", "burst", &key.requests));
    RETURN_IF_ERROR(
        ReadRateLimit(table, "ws_messages_per_second", "ws_messages_burst", &key.ws_messages));
    RETURN_IF_ERROR(table.ReadSize("max_subscriptions", &key.max_subscriptions, true));
    RETURN_IF_ERROR(table.CheckNoUnknownKeys());
    out->push_back(std::move(key));
  }
  if (absl::Status valid = ValidateApiKeys(*out); !valid.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", file, std::string(valid.message())));
  }
  return absl::OkStatus();
}

// A region name is a metric label value.
bool IsRegionName(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::ranges::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

// [[regions]] name, url, ranges; and api.region / api.default_region naming one of them.
absl::Status ReadRegions(const toml::table& root, const TableReader& api, const std::string& file,
                         RegionOptions* out) {
  if (const toml::array* regions = root["regions"].as_array()) {
    for (size_t i = 0; i < regions->size(); ++i) {
      TableReader table(*(*regions)[i].as_table(), fmt::format("regions[{}].", i), file);
      RegionOptions::Region region;
      for (const char* key : {"name", "url", "ranges"}) {
        if ((*regions)[i].as_table()->get(key) == nullptr) return table.Error(key, "is required");
      }
      RETURN_IF_ERROR(table.ReadString("name", &region.name));
      if (!IsRegionName(region.name)) {
        return table.Error("name", "must be 1 to 64 of a-z, 0-9, '-' and '_'");
      }
      for (const RegionOptions::Region& other : out->regions) {
        if (other.name == region.name) {
          return table.Error(
              "name", fmt::format("repeats \"{}\" of an earlier [[regions]] entry", region.name));
        }
      }
      RETURN_IF_ERROR(table.ReadString("url", &region.url));
      absl::StatusOr<Url> url = ParseUrl(region.url);
      if (!url.ok() || url->websocket() || region.url.find_first_of("\"\\ ") != std::string::npos) {
        return table.Error(
            "url", fmt::format("must be an http:// or https:// URL, not \"{}\"", region.url));
      }
      const toml::array* ranges = table.Node("ranges")->as_array();
      if (ranges == nullptr) return table.Error("ranges", "must be an array of CIDR ranges");
      for (size_t r = 0; r < ranges->size(); ++r) {
        const std::string key = fmt::format("ranges[{}]", r);
        if (!(*ranges)[r].is_string()) return table.Error(key, "must be a string (CIDR)");
        absl::StatusOr<AddressRange> range = ParseAddressRange((*ranges)[r].as_string()->get());
        if (!range.ok()) return table.Error(key, std::string(range.status().message()));
        region.ranges.push_back(*range);
      }
      RETURN_IF_ERROR(table.CheckNoUnknownKeys());
      out->regions.push_back(std::move(region));
    }
  }
  auto known = [&](const std::string& name) {
    return std::ranges::any_of(out->regions,
                               [&](const RegionOptions::Region& r) { return r.name == name; });
  };
  for (const auto& [key, name] :
       {std::pair<const char*, const std::string&>{"region", out->own_region},
        {"default_region", out->default_region}}) {
    if (!name.empty() && !known(name)) {
      return api.Error(key, fmt::format("names no [[regions]] entry (\"{}\")", name));
    }
  }
  return absl::OkStatus();
}

template <typename SectionFn>
absl::Status ReadServeConfig(const toml::table& root, SectionFn section, const std::string& file,
                             ConfigFiles files, ServeConfig* serve) {
  TableReader api(section("api"), "api.", file);
  HttpServerOptions& http = serve->api;
  RETURN_IF_ERROR(api.ReadListen("listen", &http.address, &http.port));
  RETURN_IF_ERROR(api.ReadSize("threads", &http.threads, /*allow_zero=*/true));
  RETURN_IF_ERROR(api.ReadSize("max_connections", &http.max_connections));
  RETURN_IF_ERROR(api.ReadSize("max_body_bytes", &http.max_body_bytes));
  RETURN_IF_ERROR(api.ReadSize("max_header_bytes", &http.max_header_bytes));
  RETURN_IF_ERROR(api.ReadSize("max_batch_size", &serve->router.codec.max_batch_size));
  RETURN_IF_ERROR(api.ReadSize("max_pipelined", &http.max_pipelined));
  RETURN_IF_ERROR(api.ReadMillis("idle_timeout_ms", &http.idle_timeout));
  RETURN_IF_ERROR(api.ReadMillis("header_timeout_ms", &http.header_timeout));
  RETURN_IF_ERROR(api.ReadMillis("body_timeout_ms", &http.body_timeout));
  RETURN_IF_ERROR(api.ReadMillis("write_timeout_ms", &http.write_timeout));
  RETURN_IF_ERROR(api.ReadMillis("drain_timeout_ms", &http.drain_timeout));
  RETURN_IF_ERROR(api.ReadCorsOrigins("cors_origins", &http.cors.allowed_origins));
  RETURN_IF_ERROR(api.ReadBool("gzip", &http.gzip.enabled));
  int64_t gzip_level = http.gzip.level;
  RETURN_IF_ERROR(api.ReadPositive("gzip_level", &gzip_level));
  if (gzip_level > 9) return api.Error("gzip_level", "must be 1 (fastest) to 9 (smallest)");
  http.gzip.level = static_cast<int>(gzip_level);
  RETURN_IF_ERROR(api.ReadSize("gzip_min_bytes", &http.gzip.min_bytes, /*allow_zero=*/true));
  RETURN_IF_ERROR(api.ReadBool("gzip_upstreams", &serve->router.upstream_gzip));
  RETURN_IF_ERROR(api.ReadString("tls_cert_file", &http.tls.certificate_file));
  RETURN_IF_ERROR(api.ReadString("tls_key_file", &http.tls.private_key_file));
  RETURN_IF_ERROR(api.ReadString("region", &http.regions.own_region));
  RETURN_IF_ERROR(api.ReadString("default_region", &http.regions.default_region));
  RETURN_IF_ERROR(api.CheckNoUnknownKeys());
  RETURN_IF_ERROR(CheckTls(api, http.tls, files));
  RETURN_IF_ERROR(ReadRegions(root, api, file, &http.regions));

  TableReader admin(section("admin"), "admin.", file);
  RETURN_IF_ERROR(admin.ReadListen("listen", &serve->admin.address, &serve->admin.port));
  RETURN_IF_ERROR(admin.ReadSize("ready_max_lag_slots", &serve->admin_options.ready_max_lag_slots,
                                 /*allow_zero=*/true));
  RETURN_IF_ERROR(admin.ReadMillis("probe_interval_ms", &serve->probe_interval));
  RETURN_IF_ERROR(admin.ReadMillis("refresh_interval_ms", &serve->admin_options.refresh_interval));
  RETURN_IF_ERROR(admin.CheckNoUnknownKeys());

  RouterOptions& router = serve->router;
  TableReader consistency(section("consistency"), "consistency.", file);
  int64_t max_wait_ms = absl::ToInt64Milliseconds(router.max_gate_wait);
  RETURN_IF_ERROR(consistency.ReadNonNegative("max_wait_ms", &max_wait_ms));
  router.max_gate_wait = absl::Milliseconds(max_wait_ms);
  RETURN_IF_ERROR(consistency.CheckNoUnknownKeys());

  TableReader router_table(section("router"), "router.", file);
  RETURN_IF_ERROR(router_table.ReadPubkey("identity", &router.identity));
  RETURN_IF_ERROR(router_table.ReadString("fqdn", &router.fqdn));
  RETURN_IF_ERROR(router_table.ReadBool("verify_owner", &router.verify_owner));
  RETURN_IF_ERROR(router_table.ReadBool("verify_owner_multiple", &router.verify_owner_multiple));
  RETURN_IF_ERROR(router_table.ReadSize("signature_memory_size", &router.signature_memory_size));
  RETURN_IF_ERROR(router_table.ReadMillis("upstream_timeout_ms", &router.upstream.request_timeout));
  RETURN_IF_ERROR(router_table.ReadMillis("upstream_deadline_ms", &router.upstream.request_deadline,
                                          /*allow_zero=*/true));
  RETURN_IF_ERROR(router_table.ReadSize("upstream_max_connections",
                                        &router.upstream.max_connections_per_endpoint));
  RETURN_IF_ERROR(
      router_table.ReadSize("upstream_max_idle", &router.upstream.max_idle_per_endpoint));
  RETURN_IF_ERROR(
      router_table.ReadSize("upstream_max_waiting", &router.upstream.max_waiting_per_endpoint));
  RETURN_IF_ERROR(router_table.ReadBool("verify_tls", &router.upstream.verify_tls));
  std::string pipeline = router.upstream.pipeline == UpstreamOptions::Pipeline::kOff  ? "off"
                         : router.upstream.pipeline == UpstreamOptions::Pipeline::kOn ? "on"
                                                                                      : "auto";
  RETURN_IF_ERROR(router_table.ReadString("upstream_pipeline", &pipeline));
  if (pipeline == "off") {
    router.upstream.pipeline = UpstreamOptions::Pipeline::kOff;
  } else if (pipeline == "auto") {
    router.upstream.pipeline = UpstreamOptions::Pipeline::kAuto;
  } else if (pipeline == "on") {
    router.upstream.pipeline = UpstreamOptions::Pipeline::kOn;
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "{}: 'router.upstream_pipeline' must be \"auto\", \"on\" or \"off\", not \"{}\"", file,
        pipeline));
  }
  RETURN_IF_ERROR(
      router_table.ReadSize("upstream_pipeline_depth", &router.upstream.pipeline_depth));
  RETURN_IF_ERROR(router_table.ReadSize("upstream_pipeline_connections",
                                        &router.upstream.pipeline_connections));
  RETURN_IF_ERROR(
      router_table.ReadSize("upstream_batch_max", &router.upstream_batch_max, /*allow_zero=*/true));
  if (router.upstream_batch_max > 1024) {
    return absl::InvalidArgumentError(
        fmt::format("{}: 'router.upstream_batch_max' must be at most 1024 calls, not {}", file,
                    router.upstream_batch_max));
  }
  RETURN_IF_ERROR(router_table.ReadSize("upstream_batch_after", &router.upstream_batch_after,
                                        /*allow_zero=*/true));
  RETURN_IF_ERROR(router_table.CheckNoUnknownKeys());

  // [upstream_health]: how endpoints are judged, chosen, retried and hedged.
  UpstreamHealthOptions& health = router.health;
  TableReader health_table(section("upstream_health"), "upstream_health.", file);
  health.probe_interval = serve->probe_interval;
  RETURN_IF_ERROR(health_table.ReadMillis("probe_interval_ms", &health.probe_interval));
  serve->probe_interval = health.probe_interval;
  RETURN_IF_ERROR(
      health_table.ReadSize("eject_consecutive_failures", &health.eject_consecutive_failures));
  RETURN_IF_ERROR(health_table.ReadFraction("eject_error_rate", &health.eject_error_rate));
  RETURN_IF_ERROR(health_table.ReadMillis("window_ms", &health.window));
  RETURN_IF_ERROR(health_table.ReadSize("min_requests", &health.min_requests));
  RETURN_IF_ERROR(health_table.ReadSize("max_slot_lag", &health.max_slot_lag));
  RETURN_IF_ERROR(health_table.ReadMillis("min_ejection_ms", &health.min_ejection, true));
  RETURN_IF_ERROR(health_table.ReadSize("recover_probes", &health.recover_probes));
  RETURN_IF_ERROR(health_table.ReadMillis("ramp_up_ms", &health.ramp_up, true));
  RETURN_IF_ERROR(health_table.ReadFraction("latency_decay", &health.latency_decay));
  RETURN_IF_ERROR(health_table.ReadFraction("circuit_failure_rate", &health.circuit_failure_rate));
  RETURN_IF_ERROR(health_table.ReadSize("circuit_min_requests", &health.circuit_min_requests));
  RETURN_IF_ERROR(health_table.ReadMillis("circuit_window_ms", &health.circuit_window));
  RETURN_IF_ERROR(health_table.ReadMillis("circuit_open_ms", &health.circuit_open, true));
  RETURN_IF_ERROR(health_table.ReadSize("half_open_trials", &health.half_open_trials));
  RETURN_IF_ERROR(health_table.ReadSize("max_attempts", &health.max_attempts));
  RETURN_IF_ERROR(health_table.ReadFraction("retry_budget_ratio", &health.retry_budget_ratio));
  RETURN_IF_ERROR(
      health_table.ReadSize("retry_budget_min", &health.retry_budget_min, /*allow_zero=*/true));
  RETURN_IF_ERROR(health_table.ReadBool("hedge", &health.hedge));
  RETURN_IF_ERROR(health_table.ReadMillis("hedge_delay_ms", &health.hedge_delay, true));
  RETURN_IF_ERROR(health_table.ReadMillis("hedge_min_delay_ms", &health.hedge_min_delay, true));
  RETURN_IF_ERROR(health_table.CheckNoUnknownKeys());
  if (absl::Status valid = ValidateHealthOptions(health); !valid.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", file, std::string(valid.message())));
  }

  // [integrity]: sampled cross-checks, consensus reads, admission (docs/architecture.md §22).
  IntegrityOptions& integrity = router.integrity;
  TableReader integrity_table(section("integrity"), "integrity.", file);
  RETURN_IF_ERROR(integrity_table.ReadFraction("sample_rate", &integrity.sample_rate));
  if (const toml::node* rates = integrity_table.Node("sample_rates")) {
    if (!rates->is_table())
      return integrity_table.Error("sample_rates", "must be a table of numbers");
    TableReader rate_table(*rates->as_table(), "integrity.sample_rates.", file);
    for (const auto& [method, value] : *rates->as_table()) {
      const std::string name(method.str());
      double rate = 0;
      RETURN_IF_ERROR(rate_table.ReadFraction(name.c_str(), &rate));
      integrity.sample_rates[name] = rate;
    }
  }
  RETURN_IF_ERROR(integrity_table.ReadSize("tiebreak_endpoints", &integrity.tiebreak_endpoints,
                                           /*allow_zero=*/true));
  RETURN_IF_ERROR(integrity_table.ReadSize("eject_after", &integrity.eject_after));
  RETURN_IF_ERROR(integrity_table.ReadMillis("window_ms", &integrity.window));
  RETURN_IF_ERROR(integrity_table.ReadSize("log_answer_bytes", &integrity.log_answer_bytes));
  if (const toml::node* methods = integrity_table.Node("consensus_methods")) {
    if (!methods->is_table()) {
      return integrity_table.Error("consensus_methods", "must be a table of \"K/N\" strings");
    }
    for (const auto& [method, value] : *methods->as_table()) {
      const std::string key = fmt::format("consensus_methods.\"{}\"", method.str());
      if (!value.is_string()) return integrity_table.Error(key, "must be a \"K/N\" string");
      absl::StatusOr<ConsensusRule> rule = ParseConsensusRule(value.as_string()->get());
      if (!rule.ok()) return integrity_table.Error(key, std::string(rule.status().message()));
      integrity.consensus_methods[std::string(method.str())] = *rule;
    }
  }
  RETURN_IF_ERROR(integrity_table.ReadBool("consensus_header", &integrity.consensus_header));
  RETURN_IF_ERROR(integrity_table.ReadBool("admission", &integrity.admission));
  RETURN_IF_ERROR(integrity_table.ReadSize("admission_max_lag", &integrity.admission_max_lag,
                                           /*allow_zero=*/true));
  RETURN_IF_ERROR(integrity_table.ReadSize("admission_latency_requests",
                                           &integrity.admission_latency_requests));
  RETURN_IF_ERROR(
      integrity_table.ReadMillis("admission_latency_p95_ms", &integrity.admission_latency_p95));
  if (const toml::node* accounts = integrity_table.Node("admission_accounts")) {
    const toml::array* list = accounts->as_array();
    if (list == nullptr) {
      return integrity_table.Error("admission_accounts", "must be an array of base58 pubkeys");
    }
    for (const toml::node& item : *list) {
      if (!item.is_string() || !Pubkey::FromBase58(item.as_string()->get()).ok()) {
        return integrity_table.Error("admission_accounts", "must be an array of base58 pubkeys");
      }
      integrity.admission_accounts.push_back(item.as_string()->get());
    }
  }
  RETURN_IF_ERROR(integrity_table.CheckNoUnknownKeys());
  if (absl::Status valid = ValidateIntegrityOptions(integrity); !valid.ok()) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", file, std::string(valid.message())));
  }

  // [upstreams.NAME] endpoints = [{url, weight}]
  for (const auto& [name_key, node] : section("upstreams")) {
    const std::string name(name_key.str());
    const std::string prefix = fmt::format("upstreams.{}.", name);
    if (!node.is_table()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: 'upstreams.{}' must be a table", file, name));
    }
    TableReader upstream(*node.as_table(), prefix, file);
    const toml::node* endpoints = upstream.Node("endpoints");
    if (endpoints == nullptr) return upstream.Error("endpoints", "is required");
    if (!endpoints->is_array() || endpoints->as_array()->empty()) {
      return upstream.Error("endpoints", "must be a non-empty array of {url, weight} tables");
    }
    UpstreamTarget target;
    target.name = name;
    const toml::array& list = *endpoints->as_array();
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string element = fmt::format("{}endpoints[{}].", prefix, i);
      if (!list[i].is_table()) {
        return absl::InvalidArgumentError(
            fmt::format("{}: '{}endpoints[{}]' must be a table {{url = \"...\", weight = 1}}", file,
                        prefix, i));
      }
      TableReader endpoint_table(*list[i].as_table(), element, file);
      UpstreamEndpoint endpoint;
      if (list[i].as_table()->get("url") == nullptr) {
        return endpoint_table.Error("url", "is required");
      }
      RETURN_IF_ERROR(endpoint_table.ReadString("url", &endpoint.url));
      if (absl::StatusOr<ParsedUrl> url = ParseUpstreamUrl(endpoint.url); !url.ok()) {
        return endpoint_table.Error(
            "url", fmt::format("is not a usable URL: {}", std::string(url.status().message())));
      }
      RETURN_IF_ERROR(endpoint_table.ReadSize("weight", &endpoint.weight));
      RETURN_IF_ERROR(endpoint_table.CheckNoUnknownKeys());
      target.endpoints.push_back(std::move(endpoint));
    }
    RETURN_IF_ERROR(upstream.CheckNoUnknownKeys());
    router.upstreams.push_back(std::move(target));
  }
  auto has_upstream = [&](const std::string& name) {
    for (const UpstreamTarget& t : router.upstreams) {
      if (t.name == name) return true;
    }
    return false;
  };

  // [[ers]]
  if (const toml::array* ers = root["ers"].as_array()) {
    for (size_t i = 0; i < ers->size(); ++i) {
      TableReader er_table(*(*ers)[i].as_table(), fmt::format("ers[{}].", i), file);
      ErRoute er;
      RETURN_IF_ERROR(er_table.ReadPubkey("identity", &er.identity, /*required=*/true));
      if ((*ers)[i].as_table()->get("upstream") == nullptr) {
        return er_table.Error("upstream", "is required");
      }
      RETURN_IF_ERROR(er_table.ReadString("upstream", &er.target));
      if (!has_upstream(er.target)) {
        return er_table.Error("upstream",
                              fmt::format("names no configured upstream (\"{}\")", er.target));
      }
      RETURN_IF_ERROR(er_table.ReadString("fqdn", &er.fqdn));
      RETURN_IF_ERROR(er_table.ReadSize("base_fee", &er.base_fee, /*allow_zero=*/true));
      RETURN_IF_ERROR(er_table.ReadSize("block_time_ms", &er.block_time_ms));
      RETURN_IF_ERROR(er_table.ReadString("country_code", &er.country_code));
      RETURN_IF_ERROR(er_table.ReadBool("pin", &er.pinned));
      RETURN_IF_ERROR(er_table.CheckNoUnknownKeys());
      for (const ErRoute& other : router.ers) {
        if (other.identity == er.identity) {
          return er_table.Error("identity", "repeats the identity of an earlier [[ers]] entry");
        }
      }
      router.ers.push_back(std::move(er));
    }
  }

  // [routing]
  TableReader routing(section("routing"), "routing.", file);
  RoutingTable& table = router.routing;
  RETURN_IF_ERROR(routing.ReadString("default_er", &table.default_er));
  if (!table.default_er.empty() && !has_upstream(table.default_er)) {
    return routing.Error("default_er",
                         fmt::format("names no configured upstream (\"{}\")", table.default_er));
  }
  RETURN_IF_ERROR(routing.ReadBool("forward_unknown_methods", &table.forward_unknown_methods));
  if (const toml::node* methods = routing.Node("methods")) {
    if (!methods->is_table()) return routing.Error("methods", "must be a table of strings");
    for (const auto& [pattern, target] : *methods->as_table()) {
      const std::string key = fmt::format("methods.\"{}\"", pattern.str());
      if (!target.is_string()) return routing.Error(key, "must be a string (an upstream name)");
      const std::string name = target.as_string()->get();
      if (!has_upstream(name)) {
        return routing.Error(key, fmt::format("names no configured upstream (\"{}\")", name));
      }
      table.method_rules.push_back(MethodRule{std::string(pattern.str()), name});
    }
  }
  RETURN_IF_ERROR(routing.CheckNoUnknownKeys());

  // [registry]: ER discovery from the Magic Domain Program.
  TableReader registry(section("registry"), "registry.", file);
  ErRegistryWatcherOptions& watcher = serve->registry;
  RETURN_IF_ERROR(registry.ReadBool("enabled", &serve->registry_enabled));
  RETURN_IF_ERROR(registry.ReadString("url", &watcher.url));
  RETURN_IF_ERROR(registry.ReadString("pubsub_url", &watcher.pubsub_url));
  RETURN_IF_ERROR(registry.ReadPubkey("program", &watcher.program));
  RETURN_IF_ERROR(registry.ReadMillis("resync_interval_ms", &watcher.resync_interval));
  RETURN_IF_ERROR(registry.ReadMillis("request_timeout_ms", &watcher.request_timeout));
  RETURN_IF_ERROR(registry.CheckNoUnknownKeys());
  if (serve->registry_enabled) {
    if (watcher.url.empty()) {
      for (const UpstreamTarget& t : router.upstreams) {
        if (t.name == table.base && !t.endpoints.empty()) watcher.url = t.endpoints[0].url;
      }
    }
    if (absl::StatusOr<Url> url = ParseUrl(watcher.url); !url.ok() || url->websocket()) {
      return registry.Error(
          "url", fmt::format("is not an http(s) URL of the base layer (\"{}\")", watcher.url));
    }
    if (!watcher.pubsub_url.empty()) {
      if (absl::StatusOr<Url> url = ParseUrl(watcher.pubsub_url); !url.ok() || !url->websocket()) {
        return registry.Error("pubsub_url",
                              fmt::format("is not a ws(s) URL (\"{}\")", watcher.pubsub_url));
      }
    }
    router.discovered_ers = true;
  }

  // [verify]: the sealed digests against other replicas.
  TableReader verify(section("verify"), "verify.", file);
  if (const toml::node* peers = verify.Node("peers")) {
    if (!peers->is_array()) return verify.Error("peers", "must be an array of admin URLs");
    for (const toml::node& item : *peers->as_array()) {
      if (!item.is_string()) return verify.Error("peers", "must be an array of admin URLs");
      const std::string& peer = item.as_string()->get();
      if (absl::StatusOr<Url> url = ParseUrl(peer); !url.ok() || url->websocket()) {
        return verify.Error(
            "peers",
            fmt::format("has \"{}\", which is not an http(s) URL of an admin listener", peer));
      }
      serve->verify_peers.push_back(peer);
    }
  }
  int64_t interval_s = absl::ToInt64Seconds(serve->verify.interval);
  RETURN_IF_ERROR(verify.ReadPositive("interval_s", &interval_s));
  serve->verify.interval = absl::Seconds(interval_s);
  RETURN_IF_ERROR(verify.ReadSize("max_slots", &serve->verify.check.max_slots));
  RETURN_IF_ERROR(verify.ReadMillis("timeout_ms", &serve->verify_timeout));
  RETURN_IF_ERROR(verify.CheckNoUnknownKeys());

  // [er_probe]: the latency probe of every ER.
  TableReader probe(section("er_probe"), "er_probe.", file);
  RETURN_IF_ERROR(probe.ReadBool("enabled", &serve->er_probe.enabled));
  RETURN_IF_ERROR(probe.ReadMillis("interval_ms", &serve->er_probe.interval));
  RETURN_IF_ERROR(probe.ReadMillis("timeout_ms", &serve->er_probe.timeout));
  RETURN_IF_ERROR(probe.CheckNoUnknownKeys());

  // [cache]
  TableReader cache_table(section("cache"), "cache.", file);
  CacheOptions& cache = router.cache;
  RETURN_IF_ERROR(cache_table.ReadBool("enabled", &cache.enabled));
  RETURN_IF_ERROR(cache_table.ReadBool("coalesce", &cache.coalesce));
  RETURN_IF_ERROR(cache_table.ReadScaledSize("max_mb", &cache.max_bytes, 20));
  RETURN_IF_ERROR(cache_table.ReadScaledSize("max_entry_kb", &cache.max_entry_bytes, 10));
  RETURN_IF_ERROR(cache_table.ReadMillis("final_ttl_ms", &cache.final_ttl, /*allow_zero=*/true));
  RETURN_IF_ERROR(cache_table.ReadMillis("slot_ttl_ms", &cache.slot_ttl, /*allow_zero=*/true));
  RETURN_IF_ERROR(
      cache_table.ReadMillis("negative_ttl_ms", &cache.negative_ttl, /*allow_zero=*/true));
  RETURN_IF_ERROR(cache_table.ReadString("redis", &cache.redis_url));
  if (!cache.redis_url.empty()) {
    if (absl::StatusOr<RedisEndpoint> redis = ParseRedisUrl(cache.redis_url); !redis.ok()) {
      return cache_table.Error("redis", std::string(redis.status().message()));
    }
  }
  RETURN_IF_ERROR(cache_table.ReadMillis("redis_timeout_ms", &cache.redis_timeout));
  if (const toml::node* methods = cache_table.Node("methods")) {
    if (!methods->is_table()) return cache_table.Error("methods", "must be a table of strings");
    for (const auto& [pattern, value] : *methods->as_table()) {
      const std::string key = fmt::format("methods.\"{}\"", pattern.str());
      const std::string text = value.is_string() ? value.as_string()->get() : "";
      CacheMethodRule rule;
      rule.pattern = std::string(pattern.str());
      if (text == "never") {
        rule.cache_class = CacheClass::kNever;
      } else if (text == "coalesce") {
        rule.cache_class = CacheClass::kCoalesce;
      } else if (text == "final") {
        rule.cache_class = CacheClass::kFinal;
      } else if (text == "slot") {
        rule.cache_class = CacheClass::kSlotBounded;
      } else {
        return cache_table.Error(key, "must be \"never\", \"coalesce\", \"final\" or \"slot\"");
      }
      if (rule.pattern.empty() || rule.pattern.find('*') < rule.pattern.size() - 1) {
        return cache_table.Error(key, "must be a method name or a prefix ending in '*'");
      }
      cache.rules.push_back(std::move(rule));
    }
  }
  RETURN_IF_ERROR(cache_table.CheckNoUnknownKeys());

  // [access] and [[keys]]
  TableReader access_table(section("access"), "access.", file);
  AccessOptions& access = router.access;
  RETURN_IF_ERROR(access_table.ReadBool("keys_required", &access.keys_required));
  RETURN_IF_ERROR(access_table.ReadString("keys_file", &serve->keys_file));
  RETURN_IF_ERROR(ReadRateLimit(access_table, "address_requests_per_second", "address_burst",
                                &access.address_requests));
  RETURN_IF_ERROR(access_table.ReadSize("max_addresses", &access.max_addresses));
  RETURN_IF_ERROR(ReadRateLimit(access_table, "ws_messages_per_second", "ws_messages_burst",
                                &access.ws_messages_per_connection));
  RETURN_IF_ERROR(access_table.ReadString("redis", &access.redis_url));
  if (!access.redis_url.empty()) {
    if (absl::StatusOr<RedisEndpoint> redis = ParseRedisUrl(access.redis_url); !redis.ok()) {
      return access_table.Error("redis", std::string(redis.status().message()));
    }
  }
  RETURN_IF_ERROR(access_table.ReadSize("replicas", &access.replicas));
  RETURN_IF_ERROR(access_table.ReadMillis("redis_timeout_ms", &access.redis_timeout));
  RETURN_IF_ERROR(access_table.CheckNoUnknownKeys());
  RETURN_IF_ERROR(ReadApiKeys(root.get("keys"), file, &access.keys));
  if (!serve->keys_file.empty() && files == ConfigFiles::kCheck) {
    // Read now, so that a bad key file stops the start with its message; serve reads it
    // again at start and on SIGHUP.
    absl::StatusOr<std::vector<ApiKeyOptions>> from_file = LoadKeyFile(serve->keys_file);
    if (!from_file.ok()) return from_file.status();
    std::vector<ApiKeyOptions> all = access.keys;
    all.insert(all.end(), from_file->begin(), from_file->end());
    if (absl::Status valid = ValidateApiKeys(all); !valid.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{} and {}: {}", file, serve->keys_file, std::string(valid.message())));
    }
  }
  if (!serve->keys_file.empty()) {
    access.load_key_file = [path = serve->keys_file] { return LoadKeyFile(path); };
  }
  if (access.keys_required && access.keys.empty() && serve->keys_file.empty()) {
    return access_table.Error("keys_required", "needs [[keys]] or 'access.keys_file'");
  }

  // [pubsub]
  TableReader pubsub(section("pubsub"), "pubsub.", file);
  PubsubServerOptions& ws = serve->pubsub;
  RETURN_IF_ERROR(pubsub.ReadBool("enabled", &serve->pubsub_enabled));
  if (pubsub.Node("port") != nullptr) {
    int64_t port = 0;
    RETURN_IF_ERROR(pubsub.ReadNonNegative("port", &port));
    if (port > 65535) return pubsub.Error("port", "must be a port from 0 (none) to 65535");
    serve->pubsub_port = static_cast<int32_t>(port);
  }
  RETURN_IF_ERROR(pubsub.ReadSize("threads", &serve->pubsub_threads, /*allow_zero=*/true));
  RETURN_IF_ERROR(pubsub.ReadSize("max_connections", &ws.max_connections));
  RETURN_IF_ERROR(
      pubsub.ReadSize("max_subscriptions_per_connection", &ws.max_subscriptions_per_connection));
  RETURN_IF_ERROR(pubsub.ReadSize("max_message_bytes", &ws.max_message_bytes));
  RETURN_IF_ERROR(pubsub.ReadMillis("idle_timeout_ms", &ws.idle_timeout));
  RETURN_IF_ERROR(pubsub.ReadSize("max_send_queue_messages", &ws.max_send_queue_messages));
  RETURN_IF_ERROR(pubsub.ReadSize("max_send_queue_bytes", &ws.max_send_queue_bytes));
  RETURN_IF_ERROR(pubsub.ReadMillis("upstream_timeout_ms", &ws.router.upstream.call_timeout));
  RETURN_IF_ERROR(pubsub.ReadMillis("reconnect_give_up_ms", &ws.router.upstream.reconnect_give_up));
  if (const toml::node* upstreams = pubsub.Node("upstreams")) {
    if (!upstreams->is_table()) return pubsub.Error("upstreams", "must be a table of URL lists");
    for (const auto& [name_key, urls] : *upstreams->as_table()) {
      const std::string name(name_key.str());
      const std::string key = fmt::format("upstreams.{}", name);
      if (!has_upstream(name)) {
        return pubsub.Error(key, fmt::format("names no configured upstream (\"{}\")", name));
      }
      std::vector<std::string> list;
      const toml::array* array = urls.as_array();
      if (array == nullptr || array->empty()) {
        return pubsub.Error(key, "must be a non-empty array of \"ws://...\" URLs");
      }
      for (const toml::node& url : *array) {
        if (!url.is_string() || !ParseWsUrl(url.as_string()->get()).ok()) {
          return pubsub.Error(key, "must be a non-empty array of \"ws://...\" URLs");
        }
        list.push_back(url.as_string()->get());
      }
      ws.router.endpoints.emplace_back(name, std::move(list));
    }
  }
  RETURN_IF_ERROR(pubsub.CheckNoUnknownKeys());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ApiKeyOptions>> LoadKeyFile(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& error) {
    return absl::InvalidArgumentError(fmt::format("{}:{}:{}: {}", path, error.source().begin.line,
                                                  error.source().begin.column,
                                                  error.description()));
  }
  for (const auto& [key, node] : root) {
    if (key.str() != "keys") {
      return absl::InvalidArgumentError(fmt::format(
          "{}: unknown key '{}' (a key file holds [[keys]] tables only)", path, key.str()));
    }
  }
  std::vector<ApiKeyOptions> keys;
  RETURN_IF_ERROR(ReadApiKeys(root.get("keys"), path, &keys));
  return keys;
}

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
      "storage", "log",       "fold",    "api",      "admin",    "router",          "consistency",
      "routing", "upstreams", "ers",     "ingest",   "pubsub",   "upstream_health", "cache",
      "access",  "keys",      "regions", "registry", "er_probe", "verify",          "integrity"};
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
  auto section = [&](const char* name) -> const toml::table& {
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
  RETURN_IF_ERROR(log.CheckNoUnknownKeys());
  config.kafka_partitions = static_cast<int32_t>(partitions);

  TableReader fold(section("fold"), "fold.", file);
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

  TableReader ingest(section("ingest"), "ingest.", file);
  RETURN_IF_ERROR(ReadIngestEndpoints(ingest, file, &config.ingest.endpoints));
  RETURN_IF_ERROR(ingest.ReadBool("verify_tls", &config.ingest.verify_tls));
  RETURN_IF_ERROR(ingest.ReadString("tls_ca_file", &config.ingest.tls_ca_file));
  RETURN_IF_ERROR(
      ingest.ReadPositive("reconcile_interval_ms", &config.ingest.reconcile_interval_ms));
  RETURN_IF_ERROR(ingest.ReadPositive("max_lag_slots", &config.ingest.max_lag_slots));
  RETURN_IF_ERROR(ingest.ReadPositive("probe_interval_ms", &config.ingest.probe_interval_ms));
  RETURN_IF_ERROR(ingest.CheckNoUnknownKeys());

  RETURN_IF_ERROR(ReadServeConfig(root, section, file, files, &config.serve));
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
