#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/url.h"

namespace switchyard {

// Where a base-layer endpoint is (common/url.h): http://, https://, ws:// or wss://
// HOST[:PORT][/PATH].
using BaseEndpoint = Url;
inline absl::StatusOr<BaseEndpoint> ParseBaseUrl(const std::string& url) { return ParseUrl(url); }
// The pubsub endpoint Solana clients assume for an RPC URL (PubsubUrlOf).
inline absl::StatusOr<BaseEndpoint> PubsubEndpointFor(const BaseEndpoint& rpc) {
  return PubsubUrlOf(rpc);
}

// How https and wss endpoints are checked: the peer's certificate chain against the
// system's trust store (or `ca_file`, a PEM bundle, when set) and its name against the host.
struct BaseTlsOptions {
  bool verify = true;
  std::string ca_file;
};

// An HTTP answer as HttpReadClient returns it. A value type.
struct HttpReply {
  unsigned status = 0;
  std::string body;
  std::string retry_after;  // the Retry-After header, empty when there was none
};

// A keep-alive HTTP/1.1 client with blocking calls, for reads (every request may be sent
// twice): the one HTTP client of the base layer's JSON-RPC (BaseRpcClient) and of another
// replica's admin endpoints (`verify --peer`). Every call has a deadline; a failed connection
// is reopened on the next call. A kept connection that the server (or a balancer in front of
// it) closed while idle is not used again; one that fails before a byte of the answer arrives
// was stale: the request goes again at once on a new connection and counts in
// `stale_retries`. Transport errors and timeouts are Unavailable / DeadlineExceeded, their
// messages starting with `name`; any HTTP status is an answer. Used by one thread at a time;
// calls block it (never an I/O thread of the router).
class HttpReadClient {
 public:
  // A bad `tls` setting (an unreadable CA file) surfaces on the first call.
  HttpReadClient(Url endpoint, std::string name, BaseTlsOptions tls = {},
                 Counter* stale_retries = nullptr);
  ~HttpReadClient();

  // GET `target` (a path and query, below the endpoint's path).
  absl::StatusOr<HttpReply> Get(std::string_view target, absl::Duration timeout);
  // POST the JSON `body` to the endpoint's path; `what` names the request in errors.
  absl::StatusOr<HttpReply> PostJson(std::string body, std::string_view what,
                                     absl::Duration timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A keep-alive JSON-RPC client of the base layer over HTTP (an HttpReadClient), for reads.
// Used by the ingest thread only: calls block that thread.
class BaseRpcClient {
 public:
  // A bad `tls` setting (an unreadable CA file) surfaces on the first Call.
  explicit BaseRpcClient(BaseEndpoint endpoint, BaseTlsOptions tls = {},
                         Counter* stale_retries = nullptr);
  ~BaseRpcClient();

  // Sends {"jsonrpc":"2.0","id":N,"method":method,"params":params} and returns the response
  // body (which may hold a JSON-RPC error). Transport errors, HTTP errors and timeouts are
  // Unavailable / DeadlineExceeded; HTTP 429 is ResourceExhausted, with the wait its
  // Retry-After asked for in RetryAfterOf.
  absl::StatusOr<std::string> Call(const std::string& method, const std::string& params,
                                   absl::Duration timeout);

 private:
  HttpReadClient http_;
  uint64_t next_id_ = 1;
};

// The wait a base layer's HTTP 429 asked for (Retry-After), when it said.
std::optional<absl::Duration> RetryAfterOf(const absl::Status& status);

// One WebSocket pubsub connection to the base layer. Used by one thread.
class BasePubsubConnection {
 public:
  static absl::StatusOr<std::unique_ptr<BasePubsubConnection>> Connect(
      const BaseEndpoint& endpoint, absl::Duration timeout, const BaseTlsOptions& tls = {});
  ~BasePubsubConnection();

  absl::Status Send(const std::string& text, absl::Duration timeout);
  // The next message; nullopt when `timeout` passed first. A closed or broken connection is
  // an Unavailable error.
  absl::StatusOr<std::optional<std::string>> Read(absl::Duration timeout);

 private:
  struct Impl;
  explicit BasePubsubConnection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace switchyard
