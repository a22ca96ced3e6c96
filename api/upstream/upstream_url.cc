#include <string>
#include <string_view>

#include "api/upstream/pubsub_upstream.h"
#include "api/upstream/upstream.h"
#include "common/url.h"
#include "fmt/format.h"

namespace switchyard {

absl::StatusOr<ParsedUrl> ParseUpstreamUrl(std::string_view url) {
  absl::StatusOr<Url> parsed = ParseUrl(url);
  if (parsed.ok() && parsed->websocket()) {
    return absl::InvalidArgumentError(fmt::format("upstream URL {} is not http(s)://", url));
  }
  return parsed;
}

absl::StatusOr<WsEndpoint> ParseWsUrl(std::string_view url) {
  absl::StatusOr<Url> parsed = ParseUrl(url);
  if (parsed.ok() && !parsed->websocket()) {
    return absl::InvalidArgumentError(fmt::format("pubsub URL {} is not ws(s)://", url));
  }
  return parsed;
}

absl::StatusOr<std::string> PubsubUrlFor(std::string_view http_url) {
  absl::StatusOr<Url> rpc = ParseUrl(http_url);
  if (rpc.ok() && rpc->websocket()) {
    return absl::InvalidArgumentError(fmt::format("upstream URL {} is not http(s)://", http_url));
  }
  if (!rpc.ok()) return rpc.status();
  absl::StatusOr<Url> ws = PubsubUrlOf(*rpc);
  if (!ws.ok()) return ws.status();
  return ws->ToString();
}

}  // namespace switchyard
