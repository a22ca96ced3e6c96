// [access] and [[keys]] (with a key file), and the client-facing checks of [api]: its TLS
// files and the [[regions]] it names.
#include <toml++/toml.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/config.h"
#include "app/internal/config_reader.h"
#include "common/status.h"
#include "common/url.h"
#include "fmt/format.h"

namespace switchyard::config_internal {
namespace {

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

}  // namespace

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

absl::Status ReadAccess(const toml::table& root, const SectionOf& section, const std::string& file,
                        ConfigFiles files, ServeConfig* serve) {
  RouterOptions& router = serve->router;
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
  return absl::OkStatus();
}

}  // namespace switchyard::config_internal

namespace switchyard {

using config_internal::ReadApiKeys;

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

}  // namespace switchyard
