#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace switchyard {

// An endpoint URL as a client connects to it: http://, https://, ws:// or wss://
// HOST[:PORT][/PATH], the host a name, an IPv4 address or a bracketed IPv6 address.
struct Url {
  enum class Scheme { kHttp, kHttps, kWs, kWss };
  Scheme scheme = Scheme::kHttp;
  bool tls = false;  // https or wss
  std::string host;  // without brackets
  std::string port;  // the scheme's default when the URL names none
  std::string path = "/";
  bool explicit_port = false;  // the URL named the port

  bool websocket() const { return scheme == Scheme::kWs || scheme == Scheme::kWss; }
  // HOST or HOST:PORT as a Host header carries it (the port only when the URL named it;
  // an IPv6 host in brackets).
  std::string HostHeader() const;
  // The URL written out again, with the port only when the URL named it and without a path
  // of just "/".
  std::string ToString() const;
};

// Parses `text`; InvalidArgument names what is wrong (scheme, host, port) and quotes `text`.
absl::StatusOr<Url> ParseUrl(std::string_view text);

// The pubsub endpoint Solana clients assume for an RPC URL: http→ws, https→wss, the same host
// and path, the port + 1 when the URL names a port (else the scheme's default port). A ws or
// wss URL is its own pubsub endpoint.
absl::StatusOr<Url> PubsubUrlOf(const Url& rpc);

// The value of the first `name=VALUE` pair in the query of a request target
// ("/path?a=1&b=2"), as it is written (not percent-decoded); nullopt when the target has no
// such pair.
std::optional<std::string_view> QueryParameter(std::string_view target, std::string_view name);

}  // namespace switchyard
