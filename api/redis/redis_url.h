#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard {

// Where a redis:// URL points.
struct RedisEndpoint {
  std::string host;
  int port = 6379;
  int db = 0;
};

// Parses redis://HOST[:PORT][/DB] (the port defaults to 6379, the database to 0);
// InvalidArgument names what is wrong and quotes `url`.
absl::StatusOr<RedisEndpoint> ParseRedisUrl(std::string_view url);

}  // namespace switchyard
