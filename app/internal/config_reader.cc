#include "app/internal/config_reader.h"

#include <string>

#include "common/url.h"
#include "fmt/format.h"

namespace switchyard::config_internal {

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

absl::Status ReadRateLimit(TableReader& table, const char* rate_key, const char* burst_key,
                           RateLimit* out) {
  RETURN_IF_ERROR(table.ReadFraction(rate_key, &out->per_second, 0, 1e9));
  RETURN_IF_ERROR(table.ReadFraction(burst_key, &out->burst, 0, 1e9));
  if (out->burst > 0 && out->per_second == 0) {
    return table.Error(burst_key, fmt::format("needs '{}'", rate_key));
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

}  // namespace switchyard::config_internal
