#include "api/redis/redis_url.h"

#include <charconv>

#include "common/url.h"
#include "fmt/format.h"

namespace switchyard {
namespace {

constexpr std::string_view kRedisScheme = "redis://";

}  // namespace

absl::StatusOr<RedisEndpoint> ParseRedisUrl(std::string_view url) {
  auto bad = [url](std::string_view what) {
    return absl::InvalidArgumentError(fmt::format("Redis URL '{}' {}", url, what));
  };
  if (url.substr(0, kRedisScheme.size()) != kRedisScheme) return bad("must start with redis://");
  // The authority is parsed by the one URL parser, under a scheme it knows.
  const std::string as_http = fmt::format("http://{}", url.substr(kRedisScheme.size()));
  absl::StatusOr<Url> parsed = ParseUrl(as_http);
  if (!parsed.ok()) {
    const std::string quoted = fmt::format("URL '{}' ", as_http);
    const std::string message(parsed.status().message());
    return bad(message.rfind(quoted, 0) == 0 ? message.substr(quoted.size()) : message);
  }
  RedisEndpoint endpoint;
  endpoint.host = parsed->host;
  if (parsed->explicit_port) endpoint.port = std::stoi(parsed->port);
  const std::string_view db = std::string_view(parsed->path).substr(1);
  if (!db.empty()) {
    const auto [end, ec] = std::from_chars(db.data(), db.data() + db.size(), endpoint.db);
    if (ec != std::errc() || end != db.data() + db.size() || endpoint.db < 0) {
      return bad("has a database that is not a non-negative number (redis://HOST:PORT/DB)");
    }
  }
  return endpoint;
}

}  // namespace switchyard
